"""One line of an error, for verdicts, events and the model.

Errors travel through perf-sleuth as one line ("the working tree cannot be measured: ..."). The
text they come from is whatever a server, a command or a library raised: sometimes empty (a bare
``TimeoutError()``), sometimes opening with a blank line, and ``str(exc).splitlines()[0]`` crashes
on the first and says nothing on the second, both in the handler meant to report a failure."""

from __future__ import annotations

import re


def first_line(value: object, limit: int | None = None) -> str:
    """The first non-blank line of ``str(value)``, stripped (cut to ``limit`` characters); for an
    exception with no message, its type's name."""
    text = str(value)
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    if not line and isinstance(value, BaseException):
        line = type(value).__name__
    return line[:limit] if limit is not None else line


def seconds(value: float) -> str:
    """A duration the user gave, as they gave it: 1800 -> "1800", 0.5 -> "0.5" (never "0")."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def fenced(lines: list[str], info: str = "") -> list[str]:
    """``lines`` in a Markdown code fence longer than any run of backticks they hold: an imported
    session's text quotes fences of its own, and a fence of three would end at its first."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]


def counted(n: int, noun: str) -> str:
    """``n`` and its noun, singular for one ("1 event", "3 events"): a trial read "1 events"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
