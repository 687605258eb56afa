"""Importers: other agents' sessions as runs of kind ``imported`` in the transcript store.

Each format module turns a file (or folder, or SQLite file) into a ``Session``: a list of ``Step``
(system / user / assistant / tool_call / tool_result) with times, tool names, call ids, token
usage where the format records it, and the raw native record kept beside each step. A record that
cannot be read raises ``BadRecord`` naming where (file:line, or a field path); with
``skip_bad=True`` it is counted in ``Session.skipped`` and the rest is imported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

StepKind = Literal["system", "user", "assistant", "reasoning", "tool_call", "tool_result"]
FORMATS = ("opencode", "claude-code", "swe-agent", "mini-swe-agent", "openai-messages")


class BadRecord(ValueError):
    """One record of the input cannot be read: the message starts with where it is."""


class Step(BaseModel):
    kind: StepKind
    text: str = ""
    t: float | None = None  # epoch seconds
    tool: str | None = None
    call_id: str | None = None
    args: Any = None
    is_error: bool = False
    duration_s: float | None = None  # a tool result's: how long the call ran, where the format says
    usage: dict[str, int] | None = None  # input, output, cache_read: counted once per model response
    model: str | None = None
    raw: Any = None  # the native record this step came from


class Session(BaseModel):
    format: str
    source: str
    session_id: str | None = None
    title: str | None = None
    agent: str | None = None
    model: str | None = None
    steps: list[Step] = []
    skipped: int = 0
    problems: list[str] = []  # what was skipped, and why (first lines)
    totals: dict[str, int] | None = None  # token totals where the format keeps only those

    @property
    def counts_tokens(self) -> bool:
        """Does the session say what its model used at all? (A format without usage, such as a
        mini-swe-agent trajectory, read as "tokens in 0 / out 0".)"""
        return self.totals is not None or any(s.usage for s in self.steps)

    def tokens(self) -> dict[str, int]:
        if self.totals is not None:
            return self.totals
        total = {"input": 0, "output": 0, "cache_read": 0}
        for s in self.steps:
            for k, v in (s.usage or {}).items():
                total[k] = total.get(k, 0) + int(v or 0)
        return total


def convert_each(
    records: Iterable[tuple[str, Any]],
    convert: Callable[[Any], list[Step]],
    session: Session,
    skip_bad: bool,
) -> None:
    """Run ``convert`` on each (where, record); a failure is a BadRecord naming ``where``."""
    for where, record in records:
        try:
            session.steps.extend(convert(record))
        except BadRecord as exc:
            _bad(session, skip_bad, str(exc) if str(exc).startswith(where) else f"{where}: {exc}")
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            why = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__
            _bad(session, skip_bad, f"{where}: {why}")


def _bad(session: Session, skip_bad: bool, message: str) -> None:
    if not skip_bad:
        raise BadRecord(message)
    session.skipped += 1
    session.problems.append(message)


def text_of(content: Any) -> str:
    """Plain text of a message content: a string, or a list of blocks with ``text``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and "content" in block:
                parts.append(text_of(block["content"]))
        return "\n".join(parts)
    raise TypeError(f"content is a {type(content).__name__}, not text or blocks")


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BadRecord(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRecord(f"{path}: cannot read: {exc}") from exc


def detect(path: Path) -> str:
    """The format of ``path``, from its shape (never from its name alone)."""
    if path.is_dir():
        if (path / "session").is_dir() or (path / "storage" / "session").is_dir():
            return "opencode"
        raise BadRecord(f"{path}: a folder, but not an opencode storage/ tree (no session/ in it)")
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"SQLite format 3"):
        return "opencode"
    text = path.read_text(errors="replace")
    if not text.strip():
        raise BadRecord(f"{path}: empty: no session in it")
    first = text.lstrip().split("\n", 1)[0]
    try:
        line = json.loads(first)
    except json.JSONDecodeError:
        line = None
    if isinstance(line, dict) and ("parentUuid" in line or "sessionId" in line) and "type" in line:
        return "claude-code"
    if line is not None and first.strip() != text.strip():
        try:
            json.loads(text)
        except json.JSONDecodeError:  # one JSON value a line: JSONL, and no Claude Code session's
            raise BadRecord(
                f"{path}: JSON lines, but not a Claude Code session (its first line has no type with "
                f"parentUuid or sessionId); if it is one of the formats read ({', '.join(FORMATS)}), give --format"
            ) from None
    data = load_json(path)
    if isinstance(data, list):
        return "openai-messages"
    if not isinstance(data, dict):
        raise BadRecord(f"{path}: not a session this importer knows (top level is a {type(data).__name__})")
    if "trajectory_format" in data and str(data["trajectory_format"]).startswith("mini-swe-agent"):
        return "mini-swe-agent"
    if (
        "info" in data
        and isinstance(data.get("messages"), list)
        and data["messages"]
        and "parts" in data["messages"][0]
    ):
        return "opencode"
    if "history" in data or "trajectory" in data:
        return "swe-agent"
    if isinstance(data.get("messages"), list):
        info = data.get("info") or {}
        return "mini-swe-agent" if "mini_version" in info or "exit_status" in info else "openai-messages"
    raise BadRecord(f"{path}: not a session this importer knows (keys: {', '.join(list(data)[:8])})")


def read_session(path: Path, fmt: str | None = None, session_id: str | None = None, skip_bad: bool = False) -> Session:
    from transcripts.imports import claude_code, mini_swe_agent, openai_messages, opencode, swe_agent

    if not path.exists():
        raise BadRecord(f"{path}: no such file or folder")
    fmt = fmt or detect(path)
    readers = {
        "opencode": lambda: opencode.read(path, session_id, skip_bad),
        "claude-code": lambda: claude_code.read(path, skip_bad),
        "swe-agent": lambda: swe_agent.read(path, skip_bad),
        "mini-swe-agent": lambda: mini_swe_agent.read(path, skip_bad),
        "openai-messages": lambda: openai_messages.read(path, skip_bad),
    }
    if fmt not in readers:
        raise BadRecord(f"--format: unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    try:
        return readers[fmt]()
    except sqlite3.DatabaseError as exc:
        raise BadRecord(f"{path}: {exc}") from exc
