"""Transcript store and replay speed: events written per second (one commit each, and batched),
database size per 1,000 events, and strict-replay time of recorded hunts of ~1,000 and ~10,000
events.

The long recordings are real hunts (the graph, the methodical policy, real git worktrees and a
real benchmark command): a small repository whose benchmark reads N tuning variables from its
environment, one of which halves its speed. The policy blanks them all (supported), then one at
a time - about ten events per variable. Run: ``python bench/store_and_replay.py [--vars 100,1000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.graph import Hunter
from agent.replay import replay_strict
from agent.state import Budget, Hunt, Target, new_run_id
from transcripts.store import Store

BENCH = (  # ~1% noise from /dev/urandom; 2x slower while SGLANG_KNOB_7 is set
    'sh -c \'r=$(od -An -N2 -tu2 /dev/urandom | tr -d " "); '
    'if [ -n "$SGLANG_KNOB_7" ]; then echo 2.0$r; else echo 1.0$r; fi\''
)


def record_hunt(tmp: Path, n_vars: int) -> tuple[Path, str, float]:
    repo = tmp / f"repo{n_vars}"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], check=True)
    for i in range(2):
        (repo / "README").write_text(f"v{i}\n")
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", f"v{i}"], check=True)
    saved = dict(os.environ)
    os.environ.update({f"SGLANG_KNOB_{i}": "1" for i in range(n_vars)})
    db = tmp / f"runs{n_vars}.db"
    hunter = Hunter(db, tmp / "runs")
    hunt = Hunt(
        run_id=new_run_id(),
        target=Target(repo=str(repo), command=BENCH, metric="value", higher_is_better=False, good_ref="HEAD~1"),
        budget=Budget(max_probes=10 * n_vars + 20, max_wall_s=3600, samples=3),
    )
    t0 = time.perf_counter()
    try:
        result = hunter.start(hunt)
    finally:
        hunter.close()
        os.environ.clear()
        os.environ.update(saved)
    took = time.perf_counter() - t0
    assert result.root_ref == "SGLANG_KNOB_7", (result.status, result.root_summary, result.error)
    return db, hunt.run_id, took


def store_speed(tmp: Path, payloads: list[dict]) -> dict:
    store = Store(tmp / "speed.db")
    store.start_run("one", kind="bench")
    n = 5000
    t0 = time.perf_counter()
    for i in range(n):
        p = payloads[i % len(payloads)]
        store.event("one", p["kind"], p["text"], p["payload"], p.get("duration_s"))
    one = n / (time.perf_counter() - t0)
    store.start_run("many", kind="bench")
    m = 50_000
    rows = [payloads[i % len(payloads)] for i in range(m)]
    t0 = time.perf_counter()
    for i in range(0, m, 1000):
        store.events_batch("many", rows[i : i + 1000])
    batched = m / (time.perf_counter() - t0)
    store.db.execute("pragma wal_checkpoint(truncate)")
    store.close()
    size = (tmp / "speed.db").stat().st_size
    return {"committed_per_s": one, "batched_per_s": batched, "kib_per_1000": size / (n + m) * 1000 / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vars", default="100,1000", help="tuning variables per recorded hunt (~10 events each)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as t:
        tmp = Path(t)
        rows = []
        payloads: list[dict] = []
        for n in (int(x) for x in args.vars.split(",")):
            db, run, took = record_hunt(tmp, n)
            store = Store(db)
            events = store.events(run)
            store.close()
            payloads = payloads or [
                {"kind": e["kind"], "text": e["text"], "payload": json.loads(e["payload"])} for e in events
            ]
            res = replay_strict(db, run)
            assert res.identical, res.divergence
            rows.append((n, len(events), took, res.seconds))
        print("| tuning vars | events | recording (live hunt) s | strict replay s | events/s replayed |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for n, ev, took, rep in rows:
            print(f"| {n} | {ev} | {took:.1f} | {rep:.2f} | {ev / rep:,.0f} |")
        s = store_speed(tmp, payloads)
        print()
        print("| store | value |")
        print("| --- | ---: |")
        print(f"| events/s, one commit each | {s['committed_per_s']:,.0f} |")
        print(f"| events/s, batched (1,000 per commit) | {s['batched_per_s']:,.0f} |")
        print(f"| batched / one-by-one | {s['batched_per_s'] / s['committed_per_s']:.1f}x |")
        print(f"| database size per 1,000 events (KiB, payloads of a real hunt) | {s['kib_per_1000']:.0f} |")


if __name__ == "__main__":
    main()
