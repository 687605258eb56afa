"""``SSHHost``: a Host over SSH (paramiko), behaving like OpenSSH where it matters.

- ``~/.ssh/config`` aliases (HostName, User, Port, IdentityFile, ProxyJump) via paramiko's SSHConfig.
- Host keys checked against known_hosts; an unknown host is rejected unless
  ``host_key_policy="accept-new"`` (then its key is appended, like StrictHostKeyChecking=accept-new);
  a *changed* key is always refused with a message saying how to fix it.
- Key auth and ssh-agent; connect and command timeouts; keepalive.
- Commands run under ``timeout`` on the remote side, so a timed-out command really dies there.
- A dropped connection is re-established once and the command re-run; a second failure is a
  clear ``HostError``. Pass ``retry=False`` for commands that must not run twice.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import paramiko

from tools.host import Command, HostError, RunResult, shell_command

# paramiko logs a connection its transport thread loses (a host that went away, a reconnect reset
# mid-banner) as an ERROR with a traceback; with no handler of the program's own, Python's last
# resort printed that traceback on the user's stderr beside sleuth's one line about the lost host.
# What the user needs arrives as a HostError; paramiko's own log is for whoever configures logging.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_DEFAULT_CONFIG = Path("~/.ssh/config").expanduser()
_DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts").expanduser()


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Trust a host seen for the first time and remember it (never a changed key: paramiko refuses those)."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class SSHHost:
    def __init__(
        self,
        host: str,
        *,
        user: str | None = None,
        port: int | None = None,
        key_filename: str | Path | None = None,
        ssh_config: str | Path | None = None,
        known_hosts: str | Path | None = None,
        host_key_policy: str = "reject",
        connect_timeout: float = 10.0,
        keepalive_s: int = 15,
        allow_agent: bool = True,
    ) -> None:
        if host_key_policy not in ("reject", "accept-new"):
            raise ValueError(f"host_key_policy must be 'reject' or 'accept-new', not {host_key_policy!r}")
        cfg_path = Path(ssh_config).expanduser() if ssh_config else _DEFAULT_CONFIG
        entry: dict = {}
        if cfg_path.is_file():
            entry = paramiko.SSHConfig.from_path(str(cfg_path)).lookup(host)
        self.alias = host
        self.name = host
        self.hostname: str = entry.get("hostname", host)
        self.user: str | None = user or entry.get("user")
        self.port: int = int(port or entry.get("port", 22))
        keys = [str(Path(key_filename).expanduser())] if key_filename else entry.get("identityfile") or []
        self.key_filenames: list[str] = [str(Path(k).expanduser()) for k in keys]
        self.proxy_jump: str | None = entry.get("proxyjump")
        # --known-hosts, else the ssh config's own UserKnownHostsFile (its first file, as ssh
        # reads it: `ssh -F CONFIG alias` worked where the hunt said "unknown host key"), else
        # ~/.ssh/known_hosts.
        configured = (entry.get("userknownhostsfile") or "").split()
        self.known_hosts = Path(known_hosts or (configured[0] if configured else _DEFAULT_KNOWN_HOSTS)).expanduser()
        self.host_key_policy = host_key_policy
        self.connect_timeout = connect_timeout
        self.keepalive_s = keepalive_s
        self.allow_agent = allow_agent
        self._ssh_config = ssh_config
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._lock = threading.Lock()
        self._forwards: list[socket.socket] = []

    # -- connection -------------------------------------------------------------------------
    def _where(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.hostname}:{self.port}"

    def connect(self) -> paramiko.SSHClient:
        with self._lock:
            if self._client is not None and self._transport_ok(self._client):
                return self._client
            self._client = self._open()
            return self._client

    @staticmethod
    def _transport_ok(client: paramiko.SSHClient) -> bool:
        t = client.get_transport()
        return t is not None and t.is_active()

    def _open(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        policy = _AcceptNewPolicy(self.known_hosts) if self.host_key_policy == "accept-new" else paramiko.RejectPolicy()
        client.set_missing_host_key_policy(policy)
        sock = None
        if self.proxy_jump:
            self._jump = SSHHost(
                self.proxy_jump,
                ssh_config=self._ssh_config,
                known_hosts=self.known_hosts,
                host_key_policy=self.host_key_policy,
                connect_timeout=self.connect_timeout,
            )
            transport = self._jump.connect().get_transport()
            assert transport is not None
            sock = transport.open_channel(
                "direct-tcpip", (self.hostname, self.port), ("127.0.0.1", 0), timeout=self.connect_timeout
            )
        try:
            client.connect(
                self.hostname,
                port=self.port,
                username=self.user,
                key_filename=self.key_filenames or None,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                allow_agent=self.allow_agent,
                look_for_keys=not self.key_filenames,
                sock=sock,
            )
        except paramiko.BadHostKeyException as exc:
            name = _known_hosts_name(self.hostname, self.port)
            raise HostError(
                f"host key for {name} has changed (offered {exc.key.get_name()} "
                f"{exc.key.fingerprint}), refusing to connect; if the change is expected, remove the old key "
                f"with: ssh-keygen -R '{name}' -f {self.known_hosts}"
            ) from exc
        except paramiko.AuthenticationException as exc:
            raise HostError(f"ssh {self._where()}: authentication failed ({exc})") from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostError(
                    f"ssh {self._where()}: unknown host key ({self.known_hosts} has no entry for "
                    f"{_known_hosts_name(self.hostname, self.port)}); add it with "
                    f"ssh-keyscan -p {self.port} {self.hostname} >> {self.known_hosts} after checking its "
                    "fingerprint, or give a known_hosts file that has it (--known-hosts)"
                ) from exc
            raise HostError(f"ssh {self._where()}: {exc}") from exc
        except (OSError, EOFError) as exc:
            raise HostError(f"ssh {self._where()}: cannot connect ({exc})") from exc
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(self.keepalive_s)
        return client

    def close(self) -> None:
        for s in self._forwards:
            with contextlib.suppress(OSError):
                s.close()
        self._forwards.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._jump is not None:
            self._jump.close()

    # -- commands ---------------------------------------------------------------------------
    def _exec(self, line: str, timeout: float | None, on_line: Callable[[str], None] | None) -> RunResult:
        client = self.connect()
        transport = client.get_transport()
        assert transport is not None
        remote = line
        if timeout is not None:
            # Bound the command on the remote side too: closing the channel does not kill it.
            remote = f"timeout -k 5 {max(1, math.ceil(timeout))} bash -c {shlex.quote(line)}"
        start = time.monotonic()
        chan = transport.open_session(timeout=self.connect_timeout)
        chan.exec_command(remote)
        out, err = bytearray(), bytearray()
        pending = b""
        timed_out = False

        def got(data: bytes) -> None:
            nonlocal pending
            out.extend(data)
            if on_line is not None:
                pending += data
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    on_line(raw.decode(errors="replace"))

        while True:
            if timeout is not None and time.monotonic() - start > timeout + 10:
                timed_out = True  # the remote `timeout` should have fired long ago
                chan.close()
                break
            idle = True
            if chan.recv_ready():
                got(chan.recv(65536))
                idle = False
            if chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
                idle = False
            if idle:
                if chan.exit_status_ready():
                    break
                if not self._transport_ok(client):
                    raise EOFError("connection lost while the command was running")
                select.select([chan], [], [], 0.01)
        if not timed_out:
            # The exit status can come in while the loop above found nothing to read yet, with the
            # last output right behind it in the buffer (seen under load: a `git log` over SSH one
            # commit short). Drain both streams to their end before believing the output complete.
            chan.settimeout(10)
            try:
                while data := chan.recv(65536):
                    got(data)
                while data := chan.recv_stderr(65536):
                    err += data
            except TimeoutError:
                pass  # no end of stream within 10 s after the exit status: keep what came
        if on_line is not None and pending:
            on_line(pending.decode(errors="replace"))
        code = -1 if timed_out else chan.recv_exit_status()
        if code == -1 and not timed_out:
            raise EOFError("connection lost before the command reported its exit status")
        if timeout is not None and code == 124:
            timed_out = True
        return RunResult(
            command=line,
            exit_code=code,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def _with_retry(self, fn, retry: bool):
        try:
            return fn()
        except (EOFError, OSError, paramiko.SSHException) as first:
            if isinstance(first, HostError) or not retry:
                raise HostError(f"ssh {self._where()}: connection lost ({first})") from first
            with self._lock:
                if self._client is not None:
                    self._client.close()
                self._client = None
            try:
                return fn()
            except (EOFError, OSError, paramiko.SSHException) as second:
                if isinstance(second, HostError):
                    raise
                raise HostError(f"ssh {self._where()}: connection lost and one reconnect failed ({second})") from second

    def run(
        self,
        cmd: Command,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        retry: bool = True,
    ) -> RunResult:
        line = shell_command(cmd, cwd, env)
        return self._with_retry(lambda: self._exec(line, timeout, None), retry)

    def run_stream(
        self,
        cmd: Command,
        on_line: Callable[[str], None],
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        retry: bool = False,
    ) -> RunResult:
        line = shell_command(cmd, cwd, env)
        return self._with_retry(lambda: self._exec(line, timeout, on_line), retry)

    # -- files and ports --------------------------------------------------------------------
    def put(self, local: str | Path, remote: str) -> None:
        def op() -> None:
            with self.connect().open_sftp() as sftp:
                self._mkdirs(sftp, str(Path(remote).parent))
                sftp.put(str(local), remote)

        self._with_retry(op, True)

    def get(self, remote: str, local: str | Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)

        def op() -> None:
            with self.connect().open_sftp() as sftp:
                sftp.get(remote, str(local))

        self._with_retry(op, True)

    @staticmethod
    def _mkdirs(sftp: paramiko.SFTPClient, path: str) -> None:
        parts = Path(path).parts
        for i in range(1, len(parts) + 1):
            p = str(Path(*parts[:i]))
            try:
                sftp.stat(p)
            except FileNotFoundError:
                sftp.mkdir(p)

    def which(self, program: str) -> str | None:
        res = self.run(["bash", "-c", f"command -v {shlex.quote(program)}"])
        return res.stdout.strip() or None if res.ok else None

    def forward(self, remote_port: int) -> int:
        """A local port that reaches 127.0.0.1:remote_port on the host (SSH direct-tcpip)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._forwards.append(listener)

        def pump(a, b) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.close()

        def accept_loop() -> None:
            while True:
                try:
                    conn, addr = listener.accept()
                except OSError:
                    return
                try:
                    transport = self.connect().get_transport()
                    assert transport is not None
                    chan = transport.open_channel(
                        "direct-tcpip", ("127.0.0.1", remote_port), addr, timeout=self.connect_timeout
                    )
                except (paramiko.SSHException, OSError, HostError):
                    conn.close()
                    continue
                threading.Thread(target=pump, args=(conn, chan), daemon=True).start()
                threading.Thread(target=pump, args=(chan, conn), daemon=True).start()

        threading.Thread(target=accept_loop, name=f"ssh-forward-{remote_port}", daemon=True).start()
        return int(listener.getsockname()[1])
