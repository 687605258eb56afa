"""Launch a serving process on a Host from a command template, wait for /health, stop it.

The template is a shell command with ``{worktree}`` and ``{port}`` placeholders (the lab's alert
carries one). It runs under ``setsid`` with its output in a log file on the host, so stopping it
(SIGTERM, then SIGKILL, to the whole process group) kills the tree: the launch script, the
interpreter it execs, any workers. The same code drives this machine and a node over SSH, where
``/health`` and the API are reached through an SSH port forward.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import time
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tools import ports
from tools.host import Host, HostError, LocalHost
from tools.serverlog import ServerLog, first_failure, parse_log


class ServerError(RuntimeError):
    """The server exited or never became healthy; the message carries the log's tail.
    ``clash``: it failed because its port was taken, not because of what it runs."""

    def __init__(self, message: str, clash: bool = False, failure: str | None = None) -> None:
        super().__init__(message)
        self.clash = clash
        # The log's first error, read from the whole log (``first_failure``): the message keeps
        # only its tail, where a deep traceback has lost its header (mlx-lm's 22-line one left
        # "Calling `python -m mlx_lm.server...` directly is deprecated" as the reason).
        self.failure = failure


def misspelt_placeholder(template: str, known: tuple[str, ...]) -> str | None:
    """A ``{name}`` in ``template`` that is a slip for one sleuth fills (``{wortree}``, ``{prot}``):
    it went to the shell as it was, and the hunt failed at its first launch ("cd: {wortree}: No such
    file or directory", exit 1 and a run in the store). Braces of the shell's own (``${VAR}``,
    ``{a,b}``, awk's ``{print $1}``) are left alone: only a name close to a placeholder is said."""
    for m in re.finditer(r"(?<!\$)\{([A-Za-z_]+)\}", template):
        name = m.group(1)
        if name not in known and (close := difflib.get_close_matches(name, known, n=1, cutoff=0.7)):
            return f"'{{{name}}}' is not a placeholder sleuth fills; did you mean {{{close[0]}}}?"
    return None


def render(template: str, worktree: str | Path, port: int) -> str:
    return template.replace("{worktree}", shlex.quote(str(worktree))).replace("{port}", str(port))


class Server(BaseModel):
    """A running server; use as a context manager or call ``stop()``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    command: str
    host: Host
    port: int  # on the host
    local_port: int  # where this process reaches it (same as port on this machine)
    log_path: str  # on the host
    pid: int  # the process group leader
    startup_s: float = 0.0
    pid_file: Path | None = None  # registration for reaping after a crash (see ``reap``)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def log_text(self, offset: int = 0) -> str:
        res = self.host.run(["tail", "-c", f"+{offset + 1}", self.log_path], timeout=30)
        return res.stdout if res.ok else ""

    def log(self, offset: int = 0) -> ServerLog:
        return parse_log(self.log_text(offset))

    def log_size(self) -> int:
        res = self.host.run(["stat", "-c", "%s", self.log_path], timeout=30)
        return int(res.stdout.strip()) if res.ok else 0

    def alive(self) -> bool:
        return self._group_alive()

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s``. Where the
        host cannot be reached, the server's registration stays, so the next start on that host
        (``reap``: a resume, another hunt) stops it: dropped with the link, a server ran on with
        nothing to stop it, and the resumed hunt's launch made two on a one-slot node."""
        if self._stop(grace_s) and self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)

    def _stop(self, grace_s: float) -> bool:
        """Stopped (or found gone)? False when the host did not answer."""
        try:
            for sig, wait in (("TERM", grace_s), ("KILL", 5.0)):
                if not self._group_alive():
                    return True
                self.host.run(["kill", f"-{sig}", "--", f"-{self.pid}"], timeout=30)
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline:
                    if not self._group_alive():
                        return True
                    time.sleep(0.05)
            return not self._group_alive()
        except HostError:
            return False  # the host is gone: its registration stays for the next start to reap

    def _group_alive(self) -> bool:
        """Any live (non-zombie) process left in the server's session? An orphaned leader may stay
        a zombie until init reaps it, and ``kill -0`` would count it."""
        res = self.host.run(f"ps -o stat= -s {self.pid} | grep -qv '^Z'", timeout=30)
        return res.ok

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def reap(pid_dir: Path, host: Host, own: bool = False) -> list[int]:
    """Kill servers registered in ``pid_dir`` whose owning process is gone (killed mid-probe);
    ``own``: this process's too, on its way out (what it still has registered, it no longer knows
    of: a service killed mid-hunt left its hunt's server holding the GPUs until the next start)."""
    killed = []
    for f in sorted(pid_dir.glob("*.json")) if pid_dir.is_dir() else []:
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if info.get("host") != host.name:
            continue
        owner = int(info["owner"])
        if _pid_alive(owner) and not (own and owner == os.getpid()):
            continue
        Server(command="", host=host, port=0, local_port=0, log_path="", pid=int(info["pid"]), pid_file=f).stop(1.0)
        killed.append(int(info["pid"]))
    return killed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_healthy(url: str, timeout_s: float, alive=None) -> float:
    """Poll ``url`` until it answers 200; returns seconds waited. Raises TimeoutError or ServerError."""
    start = time.monotonic()
    delay = 0.02
    checks = 0
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        checks += 1
        if alive is not None and checks % 4 == 0 and not alive():
            raise ServerError("server exited before it became healthy")
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{url} not healthy after {timeout_s:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


PORT_ATTEMPTS = 3  # launches on fresh ports when the port turns out taken (``ports.clashed``)


def launch(
    template: str,
    worktree: str | Path,
    log_path: str | Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
    health_timeout_s: float = 60.0,
    host: Host | None = None,
    pid_dir: Path | None = None,
) -> Server:
    """Start the server and return once ``/health`` answers; on failure nothing is left running.

    Without ``port`` one is drawn (``tools.ports``) and held until the server answers; a server
    that finds it taken anyway is launched again on another, up to ``PORT_ATTEMPTS`` times: a
    taken port says nothing about the state being launched.

    With ``pid_dir`` the server is registered there (its pid, and ours as its owner) until it is
    stopped, so ``reap(pid_dir, host)`` can kill it if this process dies first."""
    host = host or LocalHost()
    if port is not None:
        return _launch_on(port, template, worktree, str(log_path), env, health_timeout_s, host, pid_dir)
    tried: set[int] = set()
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            with ports.claimed(host, tried) as drawn:
                tried.add(drawn)
                return _launch_on(drawn, template, worktree, str(log_path), env, health_timeout_s, host, pid_dir)
        except ports.PortError as exc:
            raise ServerError(str(exc)) from exc
        except ServerError as exc:
            if not exc.clash or attempt == PORT_ATTEMPTS:
                raise
            host.run(["rm", "-f", str(log_path)], timeout=30)  # the next attempt's log starts clean
    raise AssertionError("unreachable")  # the last attempt returns or raises


def _launch_on(
    port: int,
    template: str,
    worktree: str | Path,
    log_path: str,
    env: dict[str, str] | None,
    health_timeout_s: float,
    host: Host,
    pid_dir: Path | None,
) -> Server:
    command = render(template, worktree, port)
    exports = " ".join(f"export {k}={shlex.quote(v)};" for k, v in (env or {}).items())
    # On this machine the starter registers the server itself, before it answers: it runs in a
    # session of its own, so a SIGKILL of this process between the spawn and our own write (a
    # window a loaded machine widens) cannot leave an unregistered orphan.
    register = ""
    if pid_dir is not None and isinstance(host, LocalHost):
        pid_dir.mkdir(parents=True, exist_ok=True)
        entry = json.dumps({"pid": 0, "owner": os.getpid(), "host": host.name}).replace('"pid": 0', '"pid": %d')
        tmp = pid_dir / f".starting-{os.getpid()}-{port}.tmp"
        register = (
            f"printf {shlex.quote(entry)} $! > {shlex.quote(str(tmp))} && "
            f"mv {shlex.quote(str(tmp))} {shlex.quote(str(pid_dir))}/$!.json && "
        )
    starter = (
        f"mkdir -p {shlex.quote(str(Path(log_path).parent))} && cd {shlex.quote(str(worktree))} && "
        f"{{ {exports} setsid bash -c {shlex.quote(command)} >> {shlex.quote(log_path)} 2>&1 "
        f"< /dev/null & }} && {register}echo $!"
    )
    res = host.run(starter, timeout=30)
    if not res.ok or not res.stdout.strip().isdigit():
        raise ServerError(f"cannot start `{command}` on {host.name}: {(res.stderr or res.stdout).strip()}")
    server = Server(
        command=command, host=host, port=port, local_port=port, log_path=log_path, pid=int(res.stdout.strip())
    )
    if pid_dir is not None:
        server.pid_file = pid_dir / f"{server.pid}.json"
        if not register:  # a remote host: registered here, once its pid is known
            pid_dir.mkdir(parents=True, exist_ok=True)
            server.pid_file.write_text(json.dumps({"pid": server.pid, "owner": os.getpid(), "host": host.name}))
    try:
        server.local_port = host.forward(port)
        server.startup_s = wait_healthy(f"{server.base_url}/health", health_timeout_s, server.alive)
        if not server.alive():  # what answered is not this server: another process holds the port
            raise ServerError(f"port {port} answered /health, but the server launched on it had exited")
    except BaseException as exc:
        server.stop()
        if not isinstance(exc, TimeoutError | ServerError | HostError):
            raise  # interrupted: the server is stopped, the interruption goes on
        text = server.log_text()
        tail = "\n".join(text.splitlines()[-15:]) or "(empty log)"
        raise ServerError(
            f"{exc}: `{command}` on {host.name}; log tail:\n{tail}", ports.clashed(tail), first_failure(text)
        ) from exc
    return server
