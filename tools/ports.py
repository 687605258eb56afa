"""The port a server is launched on: one nothing else will take before the server binds it.

Asking the kernel for a free port (``bind(('', 0))``) and handing its number to a server that binds
it seconds later (after its weights load) leaves a window, and on a busy host something fills it:

- the kernel gives that same range to every outgoing connection (benchmark clients, health
  polls, pip), so a client socket can hold the port by the time the server binds it;
- another launcher asking the same way can be handed the same number.

The server then fails with "address already in use", or worse, a health poll on the port is
answered by someone else's server and that server gets measured. So the port is drawn at random
*below* the host's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), where the kernel
never hands out ports on its own, and checked free on every address. On this machine a launch
also holds a lock on the number (``flock`` under the temp dir) until its server answers, so two
perf-sleuth processes never launch on one port. A clash that still happens (a stranger's process)
is told apart from a broken server by ``clashed``, and the launch retries on another port.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import inspect
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tools.host import Host, LocalHost


def pick_free(skip: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Up to 8 free ports among 64 drawn at random below the ephemeral range, each tried on every
    address (no SO_REUSEADDR: a port in TIME_WAIT is skipped too), none of ``skip``. Where the
    range cannot be read or leaves no room below it, the kernel's choice. Self-contained: its
    source is what runs on another host (``_pick_script``)."""
    import random
    import socket

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    found: list[int] = []
    if low > 12000:
        for port in random.sample(range(10000, low), min(64, low - 10000)):
            if port in skip:
                continue
            s = socket.socket()
            try:
                s.bind(("", port))
                found.append(port)
            except OSError:
                pass
            finally:
                s.close()
            if len(found) == 8:
                break
    if not found:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        found.append(s.getsockname()[1])
        s.close()
    return found


@functools.cache
def _pick_script() -> str:
    """What another host runs (``python3 -c``): the same function, its ports one line. Built on
    first use, not at import (``inspect`` reads this file)."""
    return (
        "from __future__ import annotations\nimport sys\n"  # the host's Python may predate list[int]
        + inspect.getsource(pick_free)
        + "\nprint(' '.join(map(str, pick_free({int(p) for p in sys.argv[1:]}))))\n"
    )


_CLASH = re.compile(r"address already in use|errno 98\b|EADDRINUSE", re.I)


class PortError(RuntimeError):
    """No port could be found on the host (no Python there, or none free)."""


def clashed(log_tail: str) -> bool:
    """Did the server fail because its port was taken (not because of what it runs)?"""
    return bool(_CLASH.search(log_tail))


# A port written into a launch command where ``{port}`` belongs: `--port 18600`, `--port=18600`,
# `PORT=18600`, `-p 18600`.
_FIXED = re.compile(r"(?:--port[= ]|\bPORT=|(?<!\S)-p )(\d{2,5})\b")


def fixed_port(command: str) -> str | None:
    """The port a launch command binds itself (``--port 18600``), where a launch's every port
    clashing points: each launch sleuth made got a free port, and the server ignored it."""
    m = _FIXED.search(command)
    return m.group(0).strip() if m else None


def _lock_dir() -> Path:
    """Shared by every user's launches on this machine: world-writable and sticky, like /tmp. Its
    empty lock files stay (one per port ever drawn, so at most the ports below the ephemeral
    range): removing one that another launch is about to lock would let two launches hold it."""
    d = Path(tempfile.gettempdir()) / "perf-sleuth-ports"
    if not d.is_dir():
        d.mkdir(exist_ok=True)
        with contextlib.suppress(OSError):
            d.chmod(0o1777)
    return d


def _drawn(host: Host, avoid: set[int] | frozenset[int]) -> list[int]:
    """Free ports on ``host``: a host with ``free_ports`` (this machine, ``LocalHost``) draws them
    in-process (a Python started per launch cost 0.1 s of CPU, about 450 starts in a test run);
    any other host runs the same function there."""
    draw = getattr(host, "free_ports", None)
    if callable(draw):
        ports = draw(avoid)
        if not ports:
            raise PortError(f"cannot find a free port on {host.name}")
        return ports
    res = host.run(["python3", "-c", _pick_script(), *map(str, sorted(avoid))], timeout=30)
    ports = [int(p) for p in res.stdout.split() if p.isdigit()] if res.ok else []
    if not ports:
        raise PortError(f"cannot find a free port on {host.name}: {(res.stderr or res.stdout).strip()[-300:]}")
    return ports


@contextlib.contextmanager
def claimed(host: Host, avoid: set[int] | frozenset[int] = frozenset()) -> Iterator[int]:
    """A free port on ``host`` (none of ``avoid``), held for this process while the block runs:
    launch the server and wait for it to bind inside it."""
    ports = _drawn(host, avoid)
    if not isinstance(host, LocalHost):  # no lock there to share; the random draw is the guard
        yield ports[0]
        return
    for port in ports:
        try:
            fd = os.open(_lock_dir() / f"{port}.lock", os.O_RDONLY | os.O_CREAT, 0o644)  # flock needs no write
        except OSError:  # a lock dir or file this user cannot open: the draw alone is the guard
            yield port
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another perf-sleuth launch is about to bind it
            os.close(fd)
            continue
        try:
            yield port
        finally:
            os.close(fd)
        return
    raise PortError(f"every free port drawn on {host.name} is being launched on by another process: {ports}")
