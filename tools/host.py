"""Hosts: where commands run. ``LocalHost`` (subprocess) here; ``SSHHost`` (paramiko) in ``tools.ssh``.

Every tool takes a Host, so the same git, server and benchmark code works on this machine and on
a GPU node over SSH. Commands are argv lists (each element shell-quoted when a shell is needed:
no injection through a ref name or a path) or, explicitly, a shell string.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

Command = Sequence[str] | str


class HostError(RuntimeError):
    """The host cannot be reached or used (connection refused, host key mismatch, dropped link)."""


class RunResult(BaseModel):
    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def check(self) -> RunResult:
        if not self.ok:
            why = "timed out" if self.timed_out else f"exit code {self.exit_code}"
            tail = (self.stderr or self.stdout).strip().splitlines()[-1:] or [""]
            raise CommandError(f"`{self.command}` failed ({why}): {tail[0]}", self)
        return self


class CommandError(RuntimeError):
    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


def shell_command(cmd: Command, cwd: str | Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """One POSIX shell line: ``cd DIR && env K=V... CMD`` with every argv element quoted."""
    line = cmd if isinstance(cmd, str) else shlex.join(cmd)
    if env:
        exports = " ".join(f"export {k}={shlex.quote(v)};" for k, v in env.items() if _valid_name(k))
        line = f"{exports} {line}"
    if cwd is not None:
        line = f"cd {shlex.quote(str(cwd))} && {line}"
    return line


def _valid_name(name: str) -> bool:
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise ValueError(f"invalid environment variable name: {name!r}")
    return True


@runtime_checkable
class Host(Protocol):
    """What every tool needs from a machine."""

    name: str

    def run(
        self,
        cmd: Command,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> RunResult: ...

    def run_stream(
        self,
        cmd: Command,
        on_line: Callable[[str], None],
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> RunResult: ...

    def put(self, local: str | Path, remote: str) -> None: ...

    def get(self, remote: str, local: str | Path) -> None: ...

    def which(self, program: str) -> str | None: ...

    def forward(self, remote_port: int) -> int: ...

    def close(self) -> None: ...


class LocalHost:
    """This machine. Each command runs in its own process group: a timeout kills the whole tree."""

    name = "localhost"

    def _popen(self, cmd: Command, cwd, env) -> tuple[subprocess.Popen, str]:
        shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
        args: list[str] = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if env:
            for k in env:
                _valid_name(k)
        proc = subprocess.Popen(
            args,
            cwd=str(cwd) if cwd else None,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
            errors="replace",
        )
        return proc, shown

    @staticmethod
    def _kill_tree(proc: subprocess.Popen) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=3)
                return
            except subprocess.TimeoutExpired:
                continue

    def run(self, cmd: Command, cwd=None, env=None, timeout: float | None = None) -> RunResult:
        start = time.monotonic()
        try:
            proc, shown = self._popen(cmd, cwd, env)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as exc:
            shown = cmd if isinstance(cmd, str) else shlex.join(cmd)
            return RunResult(
                command=shown, exit_code=127, stdout="", stderr=str(exc), duration_s=time.monotonic() - start
            )
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            self._kill_tree(proc)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:  # interrupted (SIGINT/SIGTERM): never leave the command running
            self._kill_tree(proc)
            raise
        return RunResult(
            command=shown,
            exit_code=proc.returncode,
            stdout=out,
            stderr=err,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def run_stream(
        self, cmd: Command, on_line: Callable[[str], None], cwd=None, env=None, timeout: float | None = None
    ) -> RunResult:
        start = time.monotonic()
        proc, shown = self._popen(cmd, cwd, env)
        out_lines: list[str] = []
        timer = threading.Timer(timeout, self._kill_tree, [proc]) if timeout else None
        if timer:
            timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            out_lines.append(line)
            on_line(line.rstrip("\n"))
        err = proc.stderr.read() if proc.stderr else ""
        proc.wait()
        timed_out = bool(timer and not timer.is_alive() and proc.returncode != 0)
        if timer:
            timer.cancel()
        return RunResult(
            command=shown,
            exit_code=proc.returncode,
            stdout="".join(out_lines),
            stderr=err,
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )

    def put(self, local: str | Path, remote: str) -> None:
        Path(remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, remote)

    def get(self, remote: str, local: str | Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(remote, local)

    def which(self, program: str) -> str | None:
        return shutil.which(program)

    def free_ports(self, avoid: set[int] | frozenset[int] = frozenset()) -> list[int]:
        """Ports a server could bind here (``tools.ports.pick_free``), drawn in this process."""
        from tools.ports import pick_free  # tools.ports builds on this module

        return pick_free(avoid)

    def forward(self, remote_port: int) -> int:
        return remote_port

    def close(self) -> None:
        return None
