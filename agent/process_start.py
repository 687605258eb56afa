"""When this process started: a hunt's wall budget counts from there.

A trial's ``--max-wall 20`` returned after 22.7 s: the hunt's clock began after about 2 s of
imports and stopped before its report. The console script (``agent.cli.main``) marks the
process's start before anything else; the hunt it runs takes it as its own start. A hunt run in
a process that did not start for it (a test calling the commands in-process, the service's
worker) starts its clock when it starts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_marked: float | None = None

# Of a wall budget, the seconds kept for what follows its stop: stopping what runs, removing
# worktrees, writing the report and the plot (a trial's --max-wall 20 returned after 22.7 s, its
# clock started after the process's imports and stopped before its report). At most a tenth.
FINISH_RESERVE_S = 2.0


def finish_reserve_s(max_wall_s: float) -> float:
    return min(FINISH_RESERVE_S, 0.1 * max_wall_s)


def process_started_at() -> float:
    """When this process started (``time.time()``), so a hunt's wall budget counts the seconds
    its imports took (about 2 of a trial's 3 s past --max-wall): Linux's ``/proc/self/stat``
    start time against ``/proc/uptime`` (``/proc/stat``'s boot time is whole seconds); now where
    that cannot be read, or where it lies more than a minute back."""
    now = time.time()
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        started = now - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return now
    return started if 0 <= now - started <= 60 else now


def mark() -> None:
    """Called first by the console script."""
    global _marked
    _marked = process_started_at()


def take() -> float:
    """The marked start, once (a second hunt of one process starts when it starts), else now."""
    global _marked
    started, _marked = _marked, None
    return started if started is not None else time.time()
