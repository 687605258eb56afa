"""An imported ``Session`` as a run of kind ``imported`` in the store (one commit for all of it)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Literal

from transcripts.imports import Session
from transcripts.store import Store, redact


def run_id_for(session: Session, native: bool = False) -> str:
    """The same session imported twice is the same run: a hash of its steps as read, not of the
    native records they came from, so one opencode session read from ``opencode.db`` and from
    its ``opencode export`` JSON is one run (their records differ in shape; it was two runs).
    ``native``: the hash with those records, as runs imported before 2026-12-07 were named."""
    steps = [s.model_dump(mode="json", exclude=None if native else {"raw"}) for s in session.steps]
    digest = hashlib.sha256(json.dumps([session.format, session.session_id, steps]).encode()).hexdigest()
    return f"imp-{digest[:12]}"


SaveAction = Literal["imported", "already", "holds more", "updated"]


def save(store: Store, session: Session) -> tuple[str, SaveAction]:
    """Store the session; returns the run and what was done: a new run (``imported``), none
    (``already``: the same steps are a run), or, for a session whose id a run already holds, that
    run kept (``holds more``: this copy is a truncated one of it) or brought up to date
    (``updated``: the session grew since). A truncated copy had been a second run of one session."""
    for run_id in (run_id_for(session), run_id_for(session, native=True)):
        if store.run(run_id) is not None:
            return run_id, "already"
    steps = [(s.kind, redact(s.text)) for s in session.steps]
    for row in _same_session(store, session):
        held = [(e["kind"], e["text"]) for e in store.events(row["id"])]
        if steps == held:  # the same steps, read from another copy or shape
            return row["id"], "already"
        if steps == held[: len(steps)]:
            return row["id"], "holds more"
        if held == steps[: len(held)]:
            _write(store, row["id"], session, replace=True)
            return row["id"], "updated"
    run_id = run_id_for(session)
    _write(store, run_id, session)
    return run_id, "imported"


def _same_session(store: Store, session: Session) -> list[dict]:
    """Imported runs of this session (its format and id), newest first."""
    if not session.session_id or "session_id" not in store.db["runs"].columns_dict:
        return []
    rows = store.db.execute(
        "select id from runs where kind = 'imported' and session_id = ? and format = ? order by started desc",
        [session.session_id, session.format],
    ).fetchall()
    return [{"id": r[0]} for r in rows]


def _write(store: Store, run_id: str, session: Session, replace: bool = False) -> None:
    times = [s.t for s in session.steps if s.t is not None]
    tokens = session.tokens()
    fields = dict(
        kind="imported",
        policy=session.agent or session.format,
        model=session.model,
        target=session.title or session.source,
        scenario=None,
        source=session.source,
        format=session.format,
        session_id=session.session_id,
        tokens_in=tokens.get("input", 0),
        tokens_out=tokens.get("output", 0),
        skipped=session.skipped,
    )
    events = []
    called = {s.call_id: s.t for s in session.steps if s.kind == "tool_call" and s.call_id and s.t is not None}
    for s in session.steps:
        payload = {
            "tool": s.tool,
            "call_id": s.call_id,
            "args": s.args,
            "is_error": s.is_error,
            "usage": s.usage,
            "model": s.model,
            "raw": s.raw,
        }
        took = s.duration_s
        if took is None and s.kind == "tool_result" and s.t is not None and (at := called.get(s.call_id)) is not None:
            took = round(s.t - at, 3) if s.t >= at else None  # a format that times only its lines (Claude Code)
        events.append({"kind": s.kind, "text": s.text, "payload": payload, "t": s.t, "duration_s": took})
    with store.transaction():
        if replace:
            store.update_run(run_id, **fields)
            store.replace_events(run_id, events)
        else:
            store.start_run(run_id, **fields)
            store.events_batch(run_id, events)
        store.update_run(
            run_id,
            started=min(times) if times else _file_time(session.source),
            ended=max(times) if times else None,
            status="imported",
        )


def _file_time(source: str) -> float:
    """When a session without times (a SWE-agent ``.traj``) was written: its file's; it had been
    the import's, and an old trajectory listed as the newest run."""
    try:
        return Path(source).stat().st_mtime
    except OSError:
        return time.time()
