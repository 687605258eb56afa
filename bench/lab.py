"""Speed and calibration of the lab, measured side by side in one run.

    .venv/bin/python bench/lab.py [--samples 5] [--launches 5]

Prints: time from launch to a healthy /health with the seed's full simulated launch time (its
target: launch_s x time_scale, about ten samples) and with the tests' launch scale (0.02, budget
1 s), wall time of one benchmark sample of the seed scenario at its default time_scale (budget
2 s), their ratio, scenario build time, and the calibration table: measured good/bad numbers over
the seeds' numbers.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from evals.lab.builder import build
from evals.lab.demo import SEED_SPEC, run_demo
from evals.lab.measure import export_worktree, scenario_bench_config
from evals.lab.spec import load_spec
from tools.bench import run_bench
from tools.server import launch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--launches", type=int, default=5)
    args = ap.parse_args()
    spec = load_spec(SEED_SPEC)
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        root = Path(tmp)
        builds = []
        for i in range(3):
            t = time.perf_counter()
            res = build(spec, root / f"scenario{i}", launch_scale=0.02)
            builds.append(time.perf_counter() - t)
        full = build(spec, root / "full", launch_scale=1.0)
        ann, cfg = scenario_bench_config(res.root)
        tree = export_worktree(res.repo, root / "tree")
        startups, sample_walls, real_startups = [], [], []
        for i in range(args.launches):
            with launch(ann["launch_command"], tree, root / f"l{i}.log") as srv:
                startups.append(srv.startup_s)
                t = time.perf_counter()
                run_bench(cfg.model_copy(update={"endpoint": f"{srv.base_url}/v1"}))
                sample_walls.append(time.perf_counter() - t)
        full_ann, _ = scenario_bench_config(full.root)
        full_tree = export_worktree(full.repo, root / "full-tree")
        for i in range(2):
            with launch(full_ann["launch_command"], full_tree, root / f"f{i}.log", health_timeout_s=120) as srv:
                real_startups.append(srv.startup_s)
        demo = run_demo(samples=args.samples)

    def row(name: str, values: list[float], budget: float) -> None:
        med = statistics.median(values)
        print(
            f"{name:<42} median {med:7.3f} s  max {max(values):7.3f} s  budget {budget:4.1f} s  "
            f"ratio {med / budget:5.2f}"
        )

    print(
        f"seed scenario {spec.name}, time_scale {spec.time_scale}, "
        f"{cfg.requests} requests x {cfg.max_tokens} tokens per sample"
    )
    print(f"{'build (sleuth lab build)':<42} median {statistics.median(builds):7.3f} s  (no budget set)")
    row("launch -> /health (launch scale 0.02)", startups, 1.0)
    row("one benchmark sample (bad state, EAGLE-3)", sample_walls, 2.0)
    target = spec.system.launch_s * spec.time_scale
    row("launch -> /health (full simulated launch)", real_startups, target)
    ratio = statistics.median(real_startups) / statistics.median(sample_walls)
    print(f"{'a full launch / one sample':<42} {ratio:7.1f} x  (a real node: 300 s / 30 s = 10 x)")
    print()
    print(f"{'metric':<16}{'good':>8}{'seeds':>8}{'ratio':>7}{'bad':>8}{'seeds':>8}{'ratio':>7}{'p':>10}")
    for r in demo.rows:
        p = r.comparison.p_value if r.comparison else float("nan")
        print(
            f"{r.metric:<16}{r.good:8.1f}{r.seed_good:8.1f}{r.good / r.seed_good:7.3f}"
            f"{r.bad:8.1f}{r.seed_bad:8.1f}{r.bad / r.seed_bad:7.3f}{p:10.1e}"
        )


if __name__ == "__main__":
    main()
