"""An imported ``Session`` as a run of kind ``imported`` in the store (one commit for all of it)."""

from __future__ import annotations

import hashlib
import json
import time

from transcripts.imports import Session
from transcripts.store import Store


def run_id_for(session: Session, native: bool = False) -> str:
    """The same session imported twice is the same run: a hash of its steps as read, not of the
    native records they came from, so one opencode session read from ``opencode.db`` and from
    its ``opencode export`` JSON is one run (their records differ in shape; it was two runs).
    ``native``: the hash with those records, as runs imported before 2026-12-07 were named."""
    steps = [s.model_dump(mode="json", exclude=None if native else {"raw"}) for s in session.steps]
    digest = hashlib.sha256(json.dumps([session.format, session.session_id, steps]).encode()).hexdigest()
    return f"imp-{digest[:12]}"


def save(store: Store, session: Session) -> tuple[str, bool]:
    """Store the session; returns (run id, whether it was new)."""
    for run_id in (run_id_for(session), run_id_for(session, native=True)):
        if store.run(run_id) is not None:
            return run_id, False
    run_id = run_id_for(session)
    times = [s.t for s in session.steps if s.t is not None]
    tokens = session.tokens()
    store.start_run(
        run_id,
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
        events.append({"kind": s.kind, "text": s.text, "payload": payload, "t": s.t})
    store.events_batch(run_id, events)
    store.update_run(
        run_id,
        started=min(times) if times else time.time(),
        ended=max(times) if times else None,
        status="imported",
    )
    return run_id, True
