"""The same small suite on the local backend (worker processes) and on the Ray backend (a local Ray
head, dashboard off), side by side on this machine; the per-task overhead of each (a no-op job
whose result is the size of a real run's); and the model of how a sweep's wall time falls with
nodes, fitted on what was measured.

    .venv/bin/pip install -e '.[ray]' && .venv/bin/python bench/eval_scale.py [--scenarios 4] [--slots 2]

The model: a sweep of T tasks of mean duration d on n nodes with s slots each takes about
ceil(T / (n s)) d + T o, where o is the backend's per-task overhead (dispatch, and the result
brought back to the driver, which alone writes the store). It ignores stragglers (the longest
scenario bounds the last wave) and what the nodes share.
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evals.backends import LocalBackend, RayBackend
from evals.runner import run_set
from transcripts.store import Store

SPEC = """
name = "{name}"
seed = {seed}
[history]
filler = 2
[[committed]]
filler = {before}
[[committed]]
id = "slow"
subject = "Synchronize the stream after every routing step"
edits = [{{ path = "python/minisglang/layers/moe/topk.py", effect = {{ cost = "moe_topk", add_us = 40 }} }}]
[[committed]]
filler = 2
[launch]
flags = []
[alert]
good = 89
bad = 70
give_good_ref = true
requests = 2
max_tokens = 24
[truth]
culprits = ["slow"]
"""


def noop(payload_kb: int) -> dict:
    """A job that does nothing but return a run-sized result (events as plain data)."""
    return {"events": [{"kind": "note", "text": f"{i:06d}" + "x" * 994} for i in range(payload_kb)]}


def overhead(backend: str, tasks: int, payload_kb: int, slots: int) -> float:
    """Seconds per task of dispatching a no-op and bringing back its result."""
    t0 = time.perf_counter()
    if backend == "local":
        with ProcessPoolExecutor(max_workers=slots) as pool:
            list(pool.map(noop, [payload_kb] * tasks))
    else:
        import ray

        task = ray.remote(noop).options(num_cpus=1)
        ray.get([task.remote(payload_kb) for _ in range(tasks)])
    return (time.perf_counter() - t0) / tasks


def sweep(specs: list[Path], backend, db: Path) -> tuple[float, list[float]]:
    """Wall of the set and each task's wall (as its worker measured it)."""
    store = Store(db)
    walls: list[float] = []
    t0 = time.perf_counter()
    try:
        _set_id, rows = run_set(specs, store, backend=backend, on_done=lambda got, sc: walls.append(got["wall_s"]))
        for r in rows:
            assert r["error"] is None, r["error"]
    finally:
        store.close()
    return time.perf_counter() - t0, walls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", type=int, default=4)
    ap.add_argument("--slots", type=int, default=2, help="worker processes / Ray CPUs on this machine")
    ap.add_argument("--payload-kb", type=int, default=300, help="size of a no-op result (a real run: ~300 KB)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sleuth-eval-scale-"))
    specs = []
    for i in range(args.scenarios):
        p = tmp / f"s{i}.toml"
        p.write_text(SPEC.format(name=f"scale{i}", seed=100 + i, before=1 + i % 3))
        specs.append(p)

    local_wall, local_tasks = sweep(specs, LocalBackend(args.slots), tmp / "local.db")
    ray_backend = RayBackend(local_cpus=args.slots)
    ray_backend._init()
    try:
        ray_wall, ray_tasks = sweep(specs, ray_backend, tmp / "ray.db")
        o_ray = overhead("ray", 40, args.payload_kb, args.slots)
    finally:
        ray_backend.shutdown()
    o_local = overhead("local", 40, args.payload_kb, args.slots)
    size_kb = len(pickle.dumps(noop(args.payload_kb))) / 1024

    print(
        f"suite: {args.scenarios} lab scenarios, {args.slots} slots on this machine "
        f"({size_kb:.0f} KiB per no-op result)"
    )
    print("| backend | set wall (s) | mean task (s) | no-op overhead per task (ms) |")
    print("| --- | --- | --- | --- |")
    print(f"| local | {local_wall:.1f} | {statistics.mean(local_tasks):.1f} | {o_local * 1000:.1f} |")
    print(f"| ray | {ray_wall:.1f} | {statistics.mean(ray_tasks):.1f} | {o_ray * 1000:.1f} |")
    print(
        f"ray / local set wall: {ray_wall / local_wall:.2f}x; "
        f"per-task overhead ray - local: {(o_ray - o_local) * 1000:+.1f} ms"
    )

    # A task's cost on a node that runs only hunts: the local backend's mean (on this 2-core box the
    # Ray tasks share the cores with Ray's own daemons, which inflates theirs).
    d = statistics.mean(local_tasks)
    tasks = 16 * 3 * 2  # a sweep: the 16 suite scenarios x 3 repeats x 2 models
    print(
        f"\nmodel: a sweep of {tasks} tasks of {d:.0f} s, {args.slots} slots per node, "
        f"{o_ray * 1000:.0f} ms overhead each"
    )
    print("| nodes | predicted wall (min) |")
    print("| --- | --- |")
    for n in (1, 2, 4, 8, 16, 32):
        t = math.ceil(tasks / (n * args.slots)) * d + tasks * o_ray
        print(f"| {n} | {t / 60:.1f} |")


if __name__ == "__main__":
    main()
