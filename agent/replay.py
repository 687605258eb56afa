"""Replaying a recorded run: the same graph against the recorded world (see transcripts/cassette.py).

``replay_strict`` re-executes the run's own policy with every answer served from the recording
and reports ``identical`` or the first divergence. ``replay_world`` runs another policy (or
model) against the recorded world, answering what the recording cannot live against the
scenario rebuilt from its spec (or not at all, offline); it is stored as a new run linked to the
old one. Neither runs a benchmark or opens a connection for anything the recording answers.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from agent.graph import Decision, Hunter
from agent.state import INPUT_FIELDS, Hunt, LLMSettings, new_run_id
from transcripts.cassette import Cassette, Divergence, EventChecker, Offline
from transcripts.store import Store, layout


class ReplayError(ValueError):
    """The run cannot be replayed at all (unknown, imported, recorded before replays existed)."""


class ReplayResult(BaseModel):
    run_id: str
    mode: str  # strict | world
    identical: bool | None = None  # strict only
    divergence: dict | None = None  # {seq, expected, got}
    new_run: str | None = None  # world only
    status: str | None = None
    root_cause: dict | None = None
    # the verdict the replay itself wrote (the run row's verdict JSON): strict, to check against
    # the recorded one (what a summary says appears in no event); world, the new run's
    verdict: dict | None = None
    events: int = 0  # the events the replay wrote (world: the new run's)
    served: int = 0  # calls answered from the recording
    live: int = 0  # calls answered live (world mode)
    error: str | None = None
    seconds: float = 0.0


def _recorded(store: Store, run_id: str) -> tuple[dict, list[dict], Hunt]:
    row = store.run(run_id)
    if row is None:
        raise ReplayError(f"RUN: no run '{run_id}' in {store.path}")
    if not row.get("input"):
        raise ReplayError(f"RUN: run '{run_id}' ({row.get('kind')}) has no recorded input to replay from")
    hunt = Hunt.model_validate({"run_id": run_id, **json.loads(row["input"])})
    return row, store.events(run_id), hunt


def _approval(events: list[dict]) -> Decision | None:
    for e in events:
        if e["kind"] == "approval":
            return Decision.model_validate(json.loads(e["payload"]))
    return None


def _drive(hunter: Hunter, hunt: Hunt, decision: Decision | None) -> Hunt:
    """Run the graph to its end, answering the approval interrupt with the recorded decision."""
    config = hunter.config(hunt.run_id)
    hunter.app.invoke({"hunt": hunt.model_dump(mode="json")}, config)
    if hunter.pending(hunt.run_id) and decision is not None:
        hunter.app.invoke(Command(resume=decision.model_dump()), config)
    return hunter.current(hunt.run_id)


def replay_strict(db: Path, run_id: str) -> ReplayResult:
    t0 = time.perf_counter()
    store = Store(db)
    try:
        _row, events, hunt = _recorded(store, run_id)
    finally:
        store.close()
    checker, cassette = EventChecker(events), Cassette(events, strict=True)
    with tempfile.TemporaryDirectory(prefix="sleuth-replay-") as tmp:
        hunter = Hunter(
            Path(tmp) / "unused.db", Path(tmp) / "runs", store=checker, saver=InMemorySaver(), cassette=cassette
        )
        out = ReplayResult(run_id=run_id, mode="strict")
        try:
            result = _drive(hunter, hunt, _approval(events))
            left = checker.remaining()
            if left:
                e = left[0]
                raise Divergence(e["seq"], {"kind": e["kind"], "text": e["text"]}, "the end of the replay")
            out.identical, out.status = True, result.status
            out.root_cause = {"kind": result.root_kind, "ref": result.root_ref} if result.root_kind else None
            hunter.record_end(result)  # the run's row as a live driver writes it at the interrupt or the end
            out.verdict = json.loads(checker.run_fields["verdict"])
        except Divergence as d:
            out.identical = False
            out.divergence = {"seq": d.seq, "expected": d.expected, "got": d.got}
        finally:
            hunter.close()
    out.events, out.served = checker.pos, cassette.served
    out.seconds = round(time.perf_counter() - t0, 3)
    return out


def _scale_field(scale: float | None) -> dict:
    """The run row's ``launch_scale``, where there is one (a None first would make a text column)."""
    return {} if scale is None else {"launch_scale": float(scale)}


def _scale_of(root: str) -> float | None:
    from evals.lab.builder import built_launch_scale  # the lab is the world side

    return built_launch_scale(root)


def _rebuild(row: dict, into: Path) -> tuple[str, str] | None:
    """Rebuild the run's scenario from its recorded spec; (new root, old root) or None."""
    if not row.get("spec") or not row.get("scenario"):
        return None
    from evals.lab.builder import build  # the lab is the world side; imported only when needed
    from evals.lab.spec import load_spec

    into.mkdir(parents=True)
    spec_file = into / "spec.toml"
    spec_file.write_text(row["spec"])
    res = build(load_spec(spec_file), into / "scenario", launch_scale=row.get("launch_scale"))  # as it was built
    return str(res.root), row["scenario"]


def replay_world(
    db: Path,
    run_id: str,
    policy: str,
    model: str | None = None,
    offline: bool = False,
    llm: LLMSettings | None = None,
) -> ReplayResult:
    t0 = time.perf_counter()
    store = Store(db)
    row, events, old = _recorded(store, run_id)
    new_run = new_run_id()
    # The rebuilt world is the new run's (its repository is what an approval of it would revert
    # in), kept in the run's folder beside the store, not in a temp folder nobody removes.
    rewrite = None if offline else _rebuild(row, layout(db).runs / new_run / "world")
    target = old.target
    if rewrite is not None:  # the same world, built elsewhere: point the target at it
        new_root, old_root = rewrite
        target = type(target).model_validate_json(target.model_dump_json().replace(old_root, new_root))
    hunt = old.model_copy(
        update={
            "run_id": new_run,
            "policy": policy,
            "model": model,
            "llm": llm,
            "target": target,
            "started_at": time.time(),
        }
    )
    cassette = Cassette(events, strict=False, live=rewrite is not None, rewrite=rewrite)
    hunter = Hunter(db, layout(db).runs, store=store, saver=InMemorySaver(), cassette=cassette)
    out = ReplayResult(run_id=run_id, mode="world", new_run=hunt.run_id)
    try:
        hunter.lease(hunt.run_id)  # a replay that writes drives its own new run
        hunter.store.start_run(
            hunt.run_id,
            kind="replay",
            policy=policy,
            model=model,
            target=hunt.target.repo + (f" on {hunt.target.host}" if hunt.target.host else ""),  # as a hunt's row
            scenario=rewrite[0] if rewrite else row.get("scenario"),
            spec=row.get("spec"),
            parent_run=run_id,
            input=hunt.model_dump_json(include=INPUT_FIELDS),
            **_scale_field(_scale_of(rewrite[0]) if rewrite else row.get("launch_scale")),
        )
        try:
            result = _drive(hunter, hunt, None)
        except Offline as exc:
            store.event(hunt.run_id, "error", str(exc), {"phase": "replay"})
            store.update_run(hunt.run_id, status="failed", ended=time.time())
            out.status, out.error = "failed", str(exc)
        else:
            hunter.record_end(result)
            out.status = result.status
            out.root_cause = {"kind": result.root_kind, "ref": result.root_ref} if result.root_kind else None
        out.events = len(store.events(hunt.run_id))  # the new run's, as a strict replay counts its own
        new = store.run(hunt.run_id) or {}
        out.verdict = json.loads(new["verdict"]) if new.get("verdict") else None
    finally:
        hunter.close()
    out.served, out.live = cassette.served, cassette.went_live
    out.seconds = round(time.perf_counter() - t0, 3)
    return out
