"""What a hunt costs on a real GPU node, measured in the lab made as hard as one.

Every scenario of the seed and core suites is built with its full simulated launch time (about
ten benchmark samples per launch, as on a node where a launch takes minutes) on a one-slot host
(a TP-8 server holds all eight GPUs; a second one fails at start) and hunted by the methodical
policy. Per hunt: exact or not, launches, samples, device time in real-equivalent minutes (a
launch 300 s, a sample 30 s) and wall seconds; beside it:

- Pinpoint's schedule on the same scenario (Chromium's bisection service: every attempt a fresh
  launch and one sample, 10 attempts per state doubling to 160 while undecided), simulated with
  ``bench/bisect_cost.pinpoint`` from the scenario's own numbers (the alert's good and bad values,
  its noise); commits only, as Pinpoint bisects commits;
- the two-server design (two warm servers for every A/B) on the same one-slot host: the seed
  hunt with ``slots = 2`` must end cleanly, saying the host is busy, never with a traceback;
- the wall budget: the seed hunted again with ``--max-wall`` at half of what it took must end
  within 5 % of that budget.

    .venv/bin/python bench/real_cost.py [--suite seed --suite core] [--launch-scale 1.0] [--only NAME]
    .venv/bin/python bench/real_cost.py --markdown --per-row 2   # bench/real_cost.json as the README's table

The lab's clock runs at its spec's ``time_scale`` (0.2: five simulated seconds per wall second),
so a 50 s simulated launch takes 10 s of wall time here.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

LAUNCH_S, SAMPLE_S = 300.0, 30.0  # a real node: minutes to launch, tens of seconds per sample


OUT = ROOT / "bench" / "real_cost.json"


def save(rows: list[dict]) -> None:
    """This run's rows into ``bench/real_cost.json``, replacing the same scenarios' rows and
    keeping the others (an ``--only`` run once left the whole suite's table with one row)."""
    mine = {r["scenario"]: r for r in rows}
    old = json.loads(OUT.read_text()) if OUT.exists() else []
    merged = [mine.pop(r["scenario"], r) for r in old]  # in place, in the table's order
    OUT.write_text(json.dumps(merged + list(mine.values()), indent=1) + "\n")


def real_minutes(launches: float, samples: float) -> float:
    return (launches * LAUNCH_S + samples * SAMPLE_S) / 60


def markdown(rows: list[dict], per_row: int = 1) -> str:
    """The rows of ``bench/real_cost.json`` as the Markdown table the README publishes (``per_row``
    scenarios side by side, to keep it short), with the summary line under it (exact, mean
    launches and real-equivalent minutes, the core suite's mean and the largest)."""
    seed = {p.stem for p in (ROOT / "evals" / "suites" / "seed").glob("*.toml")}
    head = "| scenario | exact | launches | samples | real-equivalent | Pinpoint: accuracy / attempts / minutes "
    out = [head * per_row + "|", "| --- | :---: | ---: | ---: | ---: | --- " * per_row + "|"]
    cells = []
    for r in rows:
        c, pp = r["cost"], r["pinpoint"]
        pin = f"{pp[0] * 100:.0f}% / {pp[1]:.0f} / {real_minutes(pp[1], pp[1]):.0f} min" if pp else "-"
        name = f"`{r['scenario']}`" + (" (seed)" if r["scenario"] in seed else "")
        cells.append(
            f"| {name} | {'yes' if r['exact'] else 'no'} | {c['launches']} | {c['samples']} | "
            f"{real_minutes(c['launches'], c['samples']):.0f} min | {pin} "
        )
    cells += ["| " * 6] * (-len(cells) % per_row)  # the last row's empty cells
    out += ["".join(cells[i : i + per_row]) + "|" for i in range(0, len(cells), per_row)]
    minutes = [real_minutes(r["cost"]["launches"], r["cost"]["samples"]) for r in rows]
    core = [m for r, m in zip(rows, minutes, strict=True) if r["scenario"] not in seed]
    out.append(
        f"\nExact {sum(r['exact'] for r in rows)} of {len(rows)}; mean "
        f"{sum(r['cost']['launches'] for r in rows) / len(rows):.1f} launches and {sum(minutes) / len(minutes):.1f} "
        f"real-equivalent minutes (the core suite {sum(core) / max(1, len(core)):.1f}, the largest "
        f"{max(minutes):.0f})."
    )
    return "\n".join(out)


def hunt(spec: Path, slots: int | None = None, max_wall: float = 3600) -> dict:
    """Build and hunt one scenario (methodical, one-slot host unless ``slots``); the verdict,
    the truth and the wall time."""
    from agent.graph import Hunter
    from agent.hunt_cmd import target_from_alert
    from agent.report import verdict
    from agent.state import Budget, Hunt, new_run_id
    from evals.lab.builder import build
    from evals.lab.spec import load_spec

    work = Path(tempfile.mkdtemp(prefix="sleuth-cost-"))
    res = build(load_spec(spec), work / "scenario")
    target = target_from_alert(res.root / "alert.json", str(res.repo))
    if slots is not None:
        target.slots = slots
        target.busy_wait_s = 0  # the two-server design must fail at once, not wait for its own server
    h = Hunt(run_id=new_run_id(), target=target, budget=Budget(max_probes=30, max_wall_s=max_wall))
    hunter = Hunter(work / "runs.db", work / "runs")
    t0 = time.monotonic()
    try:
        result = hunter.start(h, scenario=str(res.root), spec=spec.read_text())
    finally:
        hunter.close()
    return {"verdict": verdict(result), "truth": res.truth, "wall_s": time.monotonic() - t0, "repo": res.repo}


def exact(v: dict, truth: dict) -> bool:
    from evals.scorer import named_refs

    named = named_refs(v)
    refs = [c["ref"] for c in truth["root_causes"]]
    if truth["kind"] in ("none", "external"):  # nothing to name: the kind is the answer
        return (v.get("root_cause") or {}).get("kind") == truth["kind"]
    return sorted(n[:10] for n in named) == sorted(r[:10] for r in refs)


def pinpoint_cost(spec_path: Path, truth: dict, repo: Path, trials: int = 40) -> tuple[float, float] | None:
    """(accuracy, mean attempts) of Pinpoint's schedule on this scenario's range, or None when
    the root cause is not one commit."""
    from bisect_cost import pinpoint

    from evals.lab.spec import load_spec

    if truth["kind"] != "commit" or len(truth["root_causes"]) != 1:
        return None
    spec = load_spec(spec_path)
    good = truth.get("pre_pull_sha") or truth["good_sha"]
    commits = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--reverse", f"{good}..{truth['head_sha']}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    culprit = commits.index(truth["root_causes"][0]["ref"]) + 1
    cv = (spec.system.noise_cv**2 + spec.system.launch_cv**2) ** 0.5  # every attempt a fresh launch
    hits, attempts = 0, 0
    for t in range(trials):
        rng = random.Random(t)

        def draw(i: int, k: int, rng=rng) -> list[float]:
            mean = spec.alert.good if i < culprit else spec.alert.bad
            return [rng.gauss(mean, cv * mean) for _ in range(k)]

        ok, _probes, n, _named = pinpoint(len(commits), culprit, draw)
        hits += ok
        attempts += n
    return hits / trials, attempts / trials


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", action="append", help="seed, core (default both)")
    ap.add_argument("--launch-scale", type=float, default=1.0, help="of each spec's simulated launch time")
    ap.add_argument("--only", action="append", help="scenario names (default all)")
    ap.add_argument("--skip-checks", action="store_true", help="no two-server and budget runs")
    ap.add_argument("--markdown", action="store_true", help="print bench/real_cost.json as Markdown, hunt nothing")
    ap.add_argument("--per-row", type=int, default=1, help="with --markdown: scenarios side by side")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(OUT.read_text()), args.per_row))
        return
    os.environ["SLEUTH_LAB_LAUNCH_SCALE"] = str(args.launch_scale)
    specs = []
    for suite in args.suite or ["seed", "core"]:
        specs += sorted((ROOT / "evals" / "suites" / suite).glob("*.toml"))
    if args.only:
        specs = [s for s in specs if s.stem in args.only]
    print(f"one-slot lab hosts, launch scale {args.launch_scale}; real-equivalent: launch {LAUNCH_S:.0f} s, "
          f"sample {SAMPLE_S:.0f} s\n")  # fmt: skip
    head = (
        f"{'scenario':<26} {'exact':>5} {'status':<18} {'launch':>6} {'sampl':>5} {'real min':>8} {'wall s':>7}"
        f"   {'pinpoint acc':>12} {'attempts':>8} {'real min':>8}"
    )
    print(head)
    print("-" * len(head))
    rows = []
    for spec in specs:
        r = hunt(spec)
        v, c = r["verdict"], r["verdict"]["cost"]
        ok = exact(v, r["truth"])
        pp = pinpoint_cost(spec, r["truth"], r["repo"])
        rows.append({"scenario": spec.stem, "exact": ok, "cost": c, "wall_s": r["wall_s"], "pinpoint": pp})
        save(rows)  # a killed run keeps its rows
        pin = (
            f"{pp[0] * 100:>11.0f}% {pp[1]:>8.0f} {real_minutes(pp[1], pp[1]):>8.0f}"
            if pp
            else f"{'-':>12} {'-':>8} {'-':>8}"
        )
        print(
            f"{spec.stem:<26} {'yes' if ok else 'no':>5} {v['status']:<18} {c['launches']:>6} {c['samples']:>5} "
            f"{real_minutes(c['launches'], c['samples']):>8.0f} {r['wall_s']:>7.0f}   {pin}",
            flush=True,
        )
    n_exact = sum(r["exact"] for r in rows)
    launches = sum(r["cost"]["launches"] for r in rows) / len(rows)
    minutes = sum(real_minutes(r["cost"]["launches"], r["cost"]["samples"]) for r in rows) / len(rows)
    print(f"\nexact {n_exact}/{len(rows)}; mean launches {launches:.1f}, mean real-equivalent minutes {minutes:.0f}")
    save(rows)
    if args.skip_checks:
        return
    seed = ROOT / "evals" / "suites" / "seed" / "eagle3_pcg_moe.toml"
    two = hunt(seed, slots=2)
    v = two["verdict"]
    busy = [h["reason"] for h in v["hypotheses"] if "no free GPU" in h["reason"]]
    print(f"\ntwo-server design on a one-slot host: status {v['status']}, error {v['error']!r}; "
          f"{len(busy)} hypotheses inconclusive with 'no free GPU'")  # fmt: skip
    took = next((r["wall_s"] for r in rows if r["scenario"] == "eagle3_pcg_moe"), None) or hunt(seed)["wall_s"]
    budget = round(took / 2, 1)
    cut = hunt(seed, max_wall=budget)
    print(f"wall budget: the seed took {took:.0f} s; with --max-wall {budget:g} it ended {cut['verdict']['status']} "
          f"after {cut['wall_s']:.1f} s ({(cut['wall_s'] / budget - 1) * 100:+.1f}% of the budget)")  # fmt: skip


if __name__ == "__main__":
    main()
