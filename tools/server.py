"""Launch a serving process from a command template, wait for /health, capture and stop it.

The template is a shell command with ``{worktree}`` and ``{port}`` placeholders (the lab's alert
carries one). The process runs in its own session, so stopping it kills the whole tree (a launch
script that execs Python, workers it spawned, ...), never leaving a server behind.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tools.serverlog import ServerLog, read_log


class ServerError(RuntimeError):
    """The server exited or never became healthy; the message carries the log's tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def render(template: str, worktree: str | Path, port: int) -> str:
    return template.replace("{worktree}", shlex.quote(str(worktree))).replace("{port}", str(port))


class Server(BaseModel):
    """A running server; use as a context manager or call ``stop()``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    command: str
    port: int
    log_path: Path
    pid: int
    startup_s: float = 0.0
    proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, offset: int = 0) -> ServerLog:
        return read_log(self.log_path, offset)

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 5.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> float:
    """Poll ``url`` until it answers 200; returns seconds waited. Raises TimeoutError or ServerError."""
    start = time.monotonic()
    delay = 0.02
    while True:
        if proc is not None and proc.poll() is not None:
            raise ServerError(f"server exited with code {proc.returncode} before it became healthy")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{url} not healthy after {timeout_s:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def launch(
    template: str,
    worktree: str | Path,
    log_path: str | Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
    health_timeout_s: float = 60.0,
) -> Server:
    """Start the server and return once ``/health`` answers; on failure nothing is left running."""
    port = port or free_port()
    command = render(template, worktree, port)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(worktree),
        )
    server = Server(command=command, port=port, log_path=log_path, pid=proc.pid, proc=proc)
    try:
        server.startup_s = wait_healthy(f"{server.base_url}/health", health_timeout_s, proc)
    except (TimeoutError, ServerError) as exc:
        server.stop()
        raise ServerError(f"{exc}; log tail:\n{_tail(log_path)}") from exc
    return server
