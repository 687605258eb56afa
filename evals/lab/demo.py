"""``sleuth lab demo``: the seed scenario measured at its good and bad state, beside the seeds' numbers."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from evals.lab.builder import build
from evals.lab.measure import (
    StateMeasurement,
    baseline_command,
    export_ref,
    export_worktree,
    measure_state,
    scenario_bench_config,
    scratch_dir,
)
from evals.lab.spec import load_spec
from tools.bench import BenchResult
from tools.stats import Comparison, compare

SEED_SPEC = Path(__file__).resolve().parents[1] / "suites" / "seed" / "eagle3_pcg_moe.toml"

# The seeds' numbers (shared/seeds/README.md): what the lab is calibrated against.
SEED_NUMBERS = {
    ("baseline", "good"): 89.0,
    ("baseline", "bad"): 82.5,
    ("eagle3", "good"): 94.0,
    ("eagle3", "bad"): 60.0,
    ("verify_ms", "good"): 19.0,
    ("verify_ms", "bad"): 29.0,
}


class DemoRow(BaseModel):
    metric: str
    good: float
    bad: float
    seed_good: float
    seed_bad: float
    within_10pct: bool
    comparison: Comparison | None = None


class DemoResult(BaseModel):
    scenario_dir: str
    good_sha: str
    head_sha: str
    rows: list[DemoRow]
    measurements: list[StateMeasurement]


def _within(measured: float, target: float) -> bool:
    return abs(measured - target) <= 0.10 * target


def run_demo(
    samples: int = 5,
    workdir: Path | None = None,
    keep: bool = False,
    on_sample: Callable[[str, BenchResult], None] | None = None,
) -> DemoResult:
    root = workdir or scratch_dir("sleuth-lab-demo-")
    scenario = root / "scenario"
    try:
        # The calibration demo measures speed, not launch cost: launches at 2 % of their simulated time.
        res = build(load_spec(SEED_SPEC), scenario, launch_scale=0.02)
        ann, bench = scenario_bench_config(scenario)
        good_tree = export_ref(res.repo, res.good_sha, root / "state-good")
        bad_tree = export_worktree(res.repo, root / "state-bad")
        eagle = ann["launch_command"]
        runs = {}
        for mode, cmd in (("baseline", baseline_command(eagle)), ("eagle3", eagle)):
            for state, tree in (("good", good_tree), ("bad", bad_tree)):
                label = f"{mode}/{state}"
                runs[(mode, state)] = measure_state(
                    tree, cmd, label, root / "logs" / f"{mode}-{state}.log", samples, bench, on_sample
                )
        rows = []
        for mode in ("baseline", "eagle3"):
            g, b = runs[(mode, "good")], runs[(mode, "bad")]
            sg, sb = SEED_NUMBERS[(mode, "good")], SEED_NUMBERS[(mode, "bad")]
            rows.append(
                DemoRow(
                    metric=f"{mode} tok/s",
                    good=g.summary.median,
                    bad=b.summary.median,
                    seed_good=sg,
                    seed_bad=sb,
                    within_10pct=_within(g.summary.median, sg) and _within(b.summary.median, sb),
                    comparison=compare(g.tok_per_s, b.tok_per_s),
                )
            )
        vg, vb = runs[("eagle3", "good")].verify_ms, runs[("eagle3", "bad")].verify_ms
        if vg and vb:
            mg, mb = sorted(vg)[len(vg) // 2], sorted(vb)[len(vb) // 2]
            rows.append(
                DemoRow(
                    metric="verify ms",
                    good=mg,
                    bad=mb,
                    seed_good=19.0,
                    seed_bad=29.0,
                    within_10pct=_within(mg, 19.0) and _within(mb, 29.0),
                    comparison=compare(vg, vb),
                )
            )
        return DemoResult(
            scenario_dir=str(scenario),
            good_sha=res.good_sha,
            head_sha=res.head_sha,
            rows=rows,
            measurements=list(runs.values()),
        )
    finally:
        if not keep and workdir is None:
            shutil.rmtree(root, ignore_errors=True)
