"""Running a suite: each scenario (x repeats) in its own worker (a local process or a Ray task, see
``evals/backends.py``) with its own dir, store and ports; the driver alone writes the main store,
scores each run as it arrives and keeps the set.

A worker builds the scenario from its spec, fingerprints the repo, hunts it with the chosen policy
(the graph stops at the approval interrupt: nothing is approved in an evaluation), fingerprints
the repo again and sends back everything the run recorded. A scenario that crashes comes back as
a failed run with its error; the set goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from agent.state import LLMSettings
from evals.backends import LocalBackend, RayBackend
from evals.job import Job
from evals.scorer import Score, score
from transcripts.recording import import_run
from transcripts.store import Store


def find_specs(paths: list[str]) -> list[Path]:
    """Spec files named, or found (recursively) in the folders named; sorted, deduplicated. A
    folder holding a real case's history bundle but no spec is an error, not a case skipped: a
    suite with one case's ``case.toml`` missing scored "100 % of 1 runs" with no word of it."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found += sorted(p.rglob("*.toml"))
            for bundle in sorted(p.rglob("*.bundle")):  # a real case's history, its case.toml gone
                if not any(bundle.parent.glob("*.toml")):
                    raise FileNotFoundError(
                        f"{bundle.parent}: holds a case's history ({bundle.name}) but no case.toml; "
                        "it would be left out of the set unsaid"
                    )
        elif p.is_file():
            found.append(p)
        else:
            raise FileNotFoundError(f"{raw}: no such file or folder")
    return list(dict.fromkeys(x.resolve() for x in found))


def _store_run(store: Store, got: dict, set_id: str) -> str | None:
    """The scored run, kept in the store. One that ended awaiting approval is stored ``concluded``:
    its world (repo, servers) is removed once scored, so nobody can approve it; a trial's store
    listed evaluation runs "awaiting_approval", and the page offered Approve for them. Its
    verdict stays as the hunt gave it (what was scored)."""
    fields: dict = {"eval_set": set_id}
    if (got.get("run") or {}).get("status") == "awaiting_approval":
        fields["status"] = "concluded"
    return import_run(store, got, **fields)


def distinct_samples(measurements: list[dict]) -> int:
    """Samples taken: a state re-measured appears once per measurement with all its samples so
    far, so count each (ref, label) at its largest."""
    most: dict[tuple[str, str], int] = {}
    for m in measurements:
        key = (m["ref"], m["label"])
        most[key] = max(most.get(key, 0), len(json.loads(m["samples"])))
    return sum(most.values())


def score_result(got: dict) -> Score | None:
    if "truth" not in got:
        return None
    if "verdict" not in got:  # crashed: a failed run
        got["verdict"] = {"status": "failed", "root_cause": None, "probes": 0, "error": got.get("error")}
    samples = distinct_samples(got.get("measurements", []))
    return score(
        got["verdict"],
        got["truth"],
        got.get("events", []),
        got.get("candidates", 0),
        samples,
        got.get("wall_s", 0.0),
        got.get("repo_intact", True),
    )


def run_set(
    specs: list[Path],
    store: Store,
    policy: str = "methodical",
    model: str | None = None,
    repeats: int = 1,
    workers: int = 1,
    on_done: Callable[[dict, Score | None], None] | None = None,
    set_id: str | None = None,
    llm: LLMSettings | None = None,
    backend: LocalBackend | RayBackend | None = None,
) -> tuple[str, list[dict]]:
    """Run every spec ``repeats`` times over ``workers`` processes; returns (set id, rows)."""
    from agent.state import new_run_id

    set_id = set_id or "set-" + new_run_id()
    backend = backend or LocalBackend(workers)
    t0 = time.time()
    done_before = (
        {(r["spec"], r["repeat"]) for r in store.db["eval_results"].rows_where("eval_set = ?", [set_id])}
        if "eval_results" in store.db.table_names()
        else set()
    )
    # A resumed set keeps when it started, and its wall time adds up every invocation's.
    before = (
        next(iter(store.db["eval_sets"].rows_where("id = ?", [set_id])), None)
        if "eval_sets" in store.db.table_names()
        else None
    ) or {}
    wall_before = float(before.get("wall_s") or 0.0)
    with store.transaction() as db:
        db["eval_sets"].upsert(
            {
                "id": set_id,
                "started": before.get("started") or t0,
                "policy": policy,
                "model": model,
                "llm": llm.model_dump_json() if llm else None,
                "repeats": repeats,
                "workers": workers,
                "backend": backend.name,
                "specs": json.dumps([str(s) for s in specs]),
            },
            pk="id",
            alter=True,
        )
    jobs = [
        Job(spec=str(s), repeat=r, policy=policy, model=model, llm=llm)
        for s in specs
        for r in range(repeats)
        if (str(s), r) not in done_before
    ]
    rows = []
    try:
        _run_jobs(backend, jobs, store, set_id, rows, on_done)
    finally:  # interrupted too: the time spent so far counts when it is resumed
        with store.transaction() as db:
            db["eval_sets"].update(set_id, {"ended": time.time(), "wall_s": wall_before + time.time() - t0}, alter=True)
    return set_id, rows


def _run_jobs(backend, jobs: list[Job], store: Store, set_id: str, rows: list[dict], on_done) -> None:
    for job, got in backend.results(jobs):
        sc = score_result(got)
        run_id = _store_run(store, got, set_id)
        row = {
            "eval_set": set_id,
            "spec": job.spec,
            "repeat": job.repeat,
            "scenario": got.get("scenario"),
            "run_id": run_id,
            "truth": json.dumps(got.get("truth")),
            "verdict": json.dumps(got.get("verdict")),
            "score": sc.model_dump_json() if sc else None,
            "error": got.get("error"),
        }
        with store.transaction() as db:
            db["eval_results"].insert(row, alter=True)
        rows.append(row)
        if on_done:
            on_done(got, sc)


def set_rows(store: Store, set_id: str) -> list[dict]:
    return list(store.db["eval_results"].rows_where("eval_set = ?", [set_id], order_by="scenario, repeat"))


def rescore(store: Store, set_id: str) -> list[Score | None]:
    """Score a stored set again (a new scorer, a corrected truth) without running a probe."""
    out = []
    for row in set_rows(store, set_id):
        truth, verdict = json.loads(row["truth"] or "null"), json.loads(row["verdict"] or "null")
        if truth is None:
            out.append(None)
            continue
        events = store.events(row["run_id"]) if row["run_id"] else []
        ms = store.measurements(row["run_id"]) if row["run_id"] else []
        old = json.loads(row["score"]) if row["score"] else {}
        sc = score(
            verdict or {"status": "failed", "probes": 0},
            truth,
            events,
            old.get("candidates", 0),
            distinct_samples(ms),
            old.get("wall_s", 0.0),
            old.get("repo_intact", True),
        )
        with store.transaction() as db:
            db["eval_results"].update(
                row["rowid"] if "rowid" in row else _rowid(store, row), {"score": sc.model_dump_json()}
            )
        out.append(sc)
    return out


def _rowid(store: Store, row: dict) -> int:
    return store.db.execute(
        "select rowid from eval_results where eval_set = ? and spec = ? and repeat = ?",
        [row["eval_set"], row["spec"], row["repeat"]],
    ).fetchone()[0]
