"""One driver per run: the lease a process holds while it drives a run.

Two processes driving one run interleave their probes in one transcript, prepare two reverts and
can both act on one approval (seen: a service killed with SIGKILL left its hunt running, and the
restarted service resumed the same run in a second process). So every command that advances a
run (``hunt``, ``resume``, ``approve``, ``reject``, a replay that writes its own run) first takes
the run's lease, and holds it until it exits.

The lease is an exclusive ``flock`` on ``driver.lock`` in the run's directory, held by an open
descriptor for the life of the process: the kernel releases it when the holder exits, however it
exits (SIGKILL included), and only then. So a lease is "taken over" exactly when its holder is
provably dead, with no heartbeat to tune and no stale-pid guess. The file also says who holds it
(pid, host, since, command), for the message a second driver gets.

Plain ``fcntl`` rather than the ``filelock`` package: the holder's record lives in the locked file
itself, the file is never deleted (deleting a flock'ed file lets a waiter lock a dead inode), and
there is no silent fallback to a soft lock that would not die with its holder. A store shared by
several machines over NFS gets the same guarantee from NFSv4's byte-range locks (Linux maps
``flock`` onto them); a filesystem without locks makes ``acquire`` fail loudly.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

LOCK_NAME = "driver.lock"


class RunBusy(RuntimeError):
    """The run is driven by another live process (``holder``: what its lease file says)."""

    def __init__(self, run_id: str, holder: dict) -> None:
        self.run_id, self.holder = run_id, holder
        super().__init__(f"run '{run_id}' is driven by another process ({describe(holder)})")


def describe(holder: dict) -> str:
    if not holder:
        return "a process that has not written its name yet"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"pid {holder.get('pid')} on {holder.get('host')}, since {since}: {holder.get('command', '?')}"


def read_holder(run_dir: Path) -> dict:
    """Who last held (or holds) the lease; {} when nobody ever did."""
    try:
        return json.loads((run_dir / LOCK_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def is_driven(run_dir: Path) -> bool:
    """Is a live process driving this run now? (Probes the lock without keeping it.)"""
    path = run_dir / LOCK_NAME
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's lock, if it got one
    return False


class RunLease:
    """The lease on one run, re-entrant within a process (a hunt that resumes its own run after
    ``--yes`` keeps the lease it has)."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.run_dir, self.run_id = run_dir, run_id
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> RunLease:
        if self._fd is not None:
            self._depth += 1
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunBusy(self.run_id, read_holder(self.run_dir)) from None
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.time(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd, self._depth = fd, 1
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth == 0:
            os.close(self._fd)  # the record stays: who drove it last
            self._fd = None

    def __enter__(self) -> RunLease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
