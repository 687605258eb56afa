"""A throwaway OpenSSH server on 127.0.0.1 for the SSH tests: its own host key, an authorized
client key, a free port; started and stopped by the test session (no system sshd involved)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


class Sshd:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.host_key = root / "ssh_host_ed25519_key"
        self.client_key = root / "id_ed25519"
        self.known_hosts = root / "known_hosts"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Sshd:
        if not self.host_key.exists():
            keygen(self.host_key)
            keygen(self.client_key)
        (self.root / "authorized_keys").write_text((self.root / "id_ed25519.pub").read_text())
        sftp = next(
            (p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server") if os.path.exists(p)),
            "internal-sftp",
        )
        (self.root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"PidFile {self.root / 'sshd.pid'}\nAuthorizedKeysFile {self.root / 'authorized_keys'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "PermitRootLogin prohibit-password\nLogLevel ERROR\n"
            f"Subsystem sftp {sftp}\n"
        )
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation dir
        with open(self.root / "sshd.log", "ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")], stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("sshd did not start listening")
        pub = (self.root / "ssh_host_ed25519_key.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        return self

    def kill_sessions(self) -> None:
        """Drop every live connection (the per-connection sshd children), keep the listener."""
        assert self.proc is not None
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        for pid in out.split():
            subprocess.run(["kill", "-9", pid], check=False)

    def drop(self) -> None:
        """Stop answering at once, with no race: the listener is frozen first (no session is forked
        while the live ones are killed; a client's reconnect waits in the backlog), then every
        session is killed and the listener ended. ``start`` again serves the same port and keys."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.kill_sessions()
        self.proc.terminate()
        self.proc.send_signal(signal.SIGCONT)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill_sessions()
            self.proc.terminate()
            self.proc.wait(timeout=10)


def require_sshd() -> None:
    """Skip the calling test where no OpenSSH server is installed, unless CI asked for one
    (``SLEUTH_REQUIRE_SSHD=1``: then fail, so a missing package cannot pass silently)."""
    import shutil

    import pytest

    if shutil.which("sshd") is None and not os.path.exists(SSHD):
        if os.environ.get("SLEUTH_REQUIRE_SSHD"):
            pytest.fail("sshd is required (SLEUTH_REQUIRE_SSHD=1) but not installed")
        pytest.skip("OpenSSH server not installed (apt-get install openssh-server)")
