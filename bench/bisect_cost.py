"""What noisy bisection costs, side by side with git bisect and Chromium Pinpoint's schedule.

    .venv/bin/python bench/bisect_cost.py [--trials 200] [--no-real]

Synthetic histories of N = 8, 32, 128, 512 linear commits, one 20 % throughput regression at a
random commit, per-sample noise CV 5 % and 10 % (normal), seeded. Three methods on the same
trials:

- ours: ``tools.bisect.bisect`` with its defaults (10 samples per reference, 3 per probe growing
  while undecided, alpha 0.001; references, the "more steps?" check and the verification
  sandwich all counted);
- git bisect run: git's midpoint rule with a script that takes ONE sample and calls it bad below
  a fixed threshold halfway between the good and bad values (simulated: same decisions, no git);
- Pinpoint: 10 samples per change doubling to 160 while undecided, p = min(KS, MWU), different
  at p <= 0.01, same above the high threshold for the alerted change (beta 0.01); each midpoint
  is compared with both ends of its segment, and one branch is followed (one step at most);
- Pinpoint all (``--hard`` only): its exploration as catapult's source runs it, every adjacent
  pair of measured changes compared, each that differs split, so several steps can be named.

Then the harder cells (``--hard``; issue 15): real noise is heavy-tailed, drifts with load and
comes in bursts, and regressions come in steps. Log-normal noise at the given CV with 2 % of
samples 2x outliers (half as fast or twice as fast), a slow drift of the machine's level (-0.02 %
per sample taken: a long bisection ends several percent below where it began), a 5 % step, and
a two-step staircase (two 10 % steps; exact means both named and nothing else, "one step" that
every commit named is a true step). Same three methods; git bisect's threshold and Pinpoint's
magnitude come from the two ends, as a person would set them. Ours also runs with
``max_culprits=1`` ("ours 1 step"): the first step only, the goal of Pinpoint's one-branch
schedule, so each of Pinpoint's two methods has ours beside it at the same goal.

Then one real run: a lab scenario with 32 local commits, one of them slowing every MoE layer,
bisected through real servers (wall time printed).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from tools.bisect import BisectConfig, ProbeError, bisect, log2_bound
from tools.stats import compare

GOOD, DROP = 100.0, 0.80


def history(n: int) -> tuple[list[str], dict[str, list[str]]]:
    shas = [f"c{i:04d}" for i in range(n + 1)]  # c0000 is the known-good commit
    return shas, {shas[i]: [shas[i - 1]] for i in range(n, 0, -1)}


def sampler(culprit: int, cv: float, rng: np.random.Generator):
    def draw(i: int, k: int) -> list[float]:
        mu = GOOD * (DROP if i >= culprit else 1.0)
        return list(rng.normal(mu, cv * mu, k))

    return draw


def hard_sampler(steps: dict[int, float], cv: float, rng: np.random.Generator, drift: float = -0.0002):
    """Heavy-tailed, drifting noise: log-normal at ``cv``, 2 % of samples 2x outliers either way,
    the level drifting by ``drift`` per sample taken; ``steps``: commit index -> the factor its
    change multiplies throughput by (from that commit on)."""
    sigma = float(np.sqrt(np.log(1 + cv**2)))
    taken = [0]

    def draw(i: int, k: int) -> list[float]:
        mu = GOOD * float(np.prod([f for at, f in steps.items() if i >= at] or [1.0]))
        out = []
        for _ in range(k):
            level = mu * (1 + drift * taken[0])
            x = level * float(rng.lognormal(-(sigma**2) / 2, sigma))
            if rng.random() < 0.02:
                x *= 2.0 if rng.random() < 0.5 else 0.5
            out.append(x)
            taken[0] += 1
        return out

    return draw


def ours(
    n: int,
    culprit: int | set[int],
    draw,
    ref_refresh: int = 0,
    verify: bool = True,
    broken: frozenset[int] = frozenset(),
    max_culprits: int = 4,
) -> tuple[bool, int, int, int]:
    """``ref_refresh``: 0 as on a server host (the ends measured once), 1 as for a benchmark
    command (a fresh sample of each end beside every probe). ``verify``: each culprit's fresh
    parent/culprit sandwich (a hunt's first bisection leaves it to its own confirmation A/B).
    ``broken``: commits that cannot be built (a probe there is skipped). ``max_culprits`` 1: the
    first step only, the goal Pinpoint's one-branch schedule has."""
    shas, parents = history(n)
    want = {culprit} if isinstance(culprit, int) else culprit
    cfg = BisectConfig(ref_refresh=ref_refresh, verify=verify, max_culprits=max_culprits)

    def probe(sha: str, k: int) -> list[float]:
        if int(sha[1:]) in broken:
            raise ProbeError(f"{sha} does not build")
        return draw(int(sha[1:]), k)

    res = bisect(parents, shas[0], shas[-1], probe, cfg)
    named = [int(c.sha[1:]) for c in res.culprits]
    return sorted(named) == sorted(want), res.probes, res.samples, res.samples - res.verification_samples, named


def buildable_mid(lo: int, hi: int, broken: frozenset[int]) -> int | None:
    """The midpoint of (lo, hi), or the nearest commit inside it that builds (``git bisect
    skip``'s way); None when none does."""
    mid = (lo + hi) // 2
    for d in range(hi - lo):
        for c in (mid + d, mid - d):
            if lo < c < hi and c not in broken:
                return c
    return None


def git_bisect(
    n: int, culprit: int, draw, threshold: float | None = None, broken: frozenset[int] = frozenset()
) -> tuple[bool, int, int]:
    lo, hi, probes = 0, n, 0
    threshold = threshold or GOOD * (1 + DROP) / 2
    while hi - lo > 1:
        mid = buildable_mid(lo, hi, broken)
        if mid is None:
            break
        probes += 1
        if draw(mid, 1)[0] < threshold:
            hi = mid
        else:
            lo = mid
    return hi == culprit, probes, probes, [hi]


def pinpoint(
    n: int, culprit: int, draw, start: int = 10, broken: frozenset[int] = frozenset()
) -> tuple[bool, int, int, list[int]]:
    """Pinpoint's schedule; ``start``: samples per change before doubling (Pinpoint's is 10; more
    buys accuracy with samples, for a comparison at equal accuracy). A midpoint that does not
    build is replaced by the nearest one that does."""
    data: dict[int, list[float]] = {}

    def ensure(i: int, k: int) -> list[float]:
        have = data.setdefault(i, [])
        if len(have) < k:
            have += draw(i, k - len(have))
        return have

    lo, hi = 0, n
    ensure(lo, start)
    ensure(hi, start)
    magnitude = abs(np.median(data[hi]) - np.median(data[lo])) / np.median(data[lo]) * 100
    probes = 0
    while hi - lo > 1:
        mid = buildable_mid(lo, hi, broken)
        if mid is None:
            break
        probes += 1
        k = start
        while True:
            a, m, b = ensure(lo, k), ensure(mid, k), ensure(hi, k)
            c_lo = compare(a, m, alpha=0.01, min_effect_pct=magnitude, beta=0.01, interval=False)
            c_hi = compare(m, b, alpha=0.01, min_effect_pct=magnitude, beta=0.01, interval=False)
            if c_lo.verdict == "different" or c_hi.verdict == "same":
                hi = mid
                break
            if c_hi.verdict == "different" or c_lo.verdict == "same":
                lo = mid
                break
            if k >= 160:
                hi, lo = (mid, lo) if c_lo.p_value < c_hi.p_value else (hi, mid)
                break
            k *= 2
    return hi == culprit, probes, sum(len(v) for v in data.values()), [hi]


def pinpoint_explore(
    n: int, draw, start: int = 10, broken: frozenset[int] = frozenset(), cap: int = 160
) -> tuple[int, int, list[int]]:
    """Pinpoint's exploration as its source runs it (catapult ``job_state.Explore``,
    ``exploration.Speculate``): every pair of adjacent measured changes is compared; a pair that
    differs gets its midpoint (a buildable one), an undecided pair 10 more attempts on the side
    with fewer (at most ``cap``; there, as where Pinpoint's high threshold has fallen below its low
    one, p <= 0.01 is different and anything else the same), a pair that is the same nothing;
    every adjacent pair that differs with nothing buildable between is a culprit. So it names
    several steps where the one-branch schedule above names one. Its speculation (two levels of
    midpoints at once) buys wall time with more samples and is left out: this counts the fewest
    samples its exploration needs. Returns (probes, samples, named)."""
    data: dict[int, list[float]] = {}

    def add(i: int, k: int) -> None:
        data.setdefault(i, []).extend(draw(i, k))

    add(0, start)
    add(n, start)
    magnitude = abs(np.median(data[n]) - np.median(data[0])) / np.median(data[0]) * 100
    changes = [0, n]

    def verdict(a: int, b: int) -> str:
        c = compare(data[a], data[b], alpha=0.01, min_effect_pct=magnitude, beta=0.01, interval=False)
        if c.verdict == "unknown" and min(len(data[a]), len(data[b])) >= cap:
            return "different" if c.p_value <= 0.01 else "same"
        return c.verdict

    while True:
        new, more = [], []
        for a, b in itertools.pairwise(changes):
            v = verdict(a, b)
            if v == "different":
                mid = buildable_mid(a, b, broken)
                if mid is not None and mid not in data:
                    new.append(mid)
            elif v != "same":
                more.append(a if len(data[a]) <= len(data[b]) else b)
        if not new and not more:
            break
        for i in new:
            add(i, start)
        for i in set(more):
            add(i, 10)
        changes = sorted(set(changes) | set(new))
    ends = itertools.pairwise(changes)
    named = [b for a, b in ends if buildable_mid(a, b, broken) is None and verdict(a, b) == "different"]
    return len(changes) - 2, sum(len(v) for v in data.values()), named


def synthetic(trials: int) -> None:
    print(f"synthetic: one {100 - DROP * 100:.0f}% regression, {trials} trials per cell, seeded\n")
    head = (
        f"{'N':>4} {'CV':>4}  {'method':<11} {'accuracy':>9} {'probes':>7} {'bound':>5} {'ratio':>6} "
        f"{'samples':>8} {'excl. sandwich':>15}"
    )
    print(head)
    print("-" * len(head))
    for n in (8, 32, 128, 512):
        for cv in (0.05, 0.10):
            rows: dict[str, list] = {"ours": [], "git bisect": [], "pinpoint": []}
            start = {k: 0.0 for k in rows}
            for t in range(trials):
                culprit = int(np.random.default_rng(10_000 + t).integers(1, n + 1))
                for name, fn in (("ours", ours), ("git bisect", git_bisect), ("pinpoint", pinpoint)):
                    rng = np.random.default_rng(1_000_000 * n + int(cv * 100) * 1000 + t)
                    t0 = time.perf_counter()
                    rows[name].append(fn(n, culprit, sampler(culprit, cv, rng)))
                    start[name] += time.perf_counter() - t0
            bound = log2_bound(n)
            for name, r in rows.items():
                acc = sum(x[0] for x in r) / len(r)
                probes = statistics.mean(x[1] for x in r)
                samples = statistics.mean(x[2] for x in r)
                excl = f"{statistics.mean(x[3] for x in r):15.1f}" if name == "ours" else f"{'':>15}"
                print(
                    f"{n:>4} {cv:>4.2f}  {name:<11} {acc:>8.1%} {probes:>7.2f} {bound:>5} {probes / bound:>6.2f} "
                    f"{samples:>8.1f} {excl}"
                )
            print()


HARD_CELLS = (  # (label, N, CV, steps: commit fraction -> factor)
    ("20% step", 32, 0.10, {0.5: 0.80}),
    ("20% step", 128, 0.10, {0.5: 0.80}),
    ("20% step", 512, 0.10, {0.5: 0.80}),
    ("10% step", 32, 0.10, {0.5: 0.90}),
    ("5% step", 32, 0.02, {0.5: 0.95}),
    ("5% step", 32, 0.05, {0.5: 0.95}),
    ("two 10% steps", 32, 0.05, {0.3: 0.90, 0.7: 0.90}),
    ("20%, unbuildable", 32, 0.10, {0.5: 0.80}),  # the culprit's two neighbours do not build
)


def hard(trials: int) -> None:
    print(f"harder: log-normal noise with 2 % 2x outliers, drift -0.02 %/sample; {trials} trials per cell, seeded\n")
    head = (
        f"{'regression':<16} {'N':>4} {'CV':>4}  {'method':<11} {'exact':>7} {'one step':>8} "
        f"{'probes':>7} {'samples':>8}"
    )
    print(head)
    print("-" * len(head))
    for label, n, cv, fractions in HARD_CELLS:
        rows: dict[str, list] = {
            "ours": [], "ours 1 step": [], "ours +ends": [], "ours +sandw": [], "git bisect": [], "pinpoint": [],
            "pinpoint x2": [], "pinpoint all": [],
        }  # fmt: skip
        for t in range(trials):
            pick = np.random.default_rng(20_000 + t)
            at = sorted({int(pick.integers(max(1, int(f * n) - n // 8), int(f * n) + n // 8 + 1)) for f in fractions})
            steps = dict(zip(at, fractions.values(), strict=False))
            want = set(steps)
            broken = frozenset({at[0] - 1, at[0] + 1}) if "unbuildable" in label else frozenset()
            for name in rows:
                rng = np.random.default_rng(3_000_000 + 1000 * n + int(cv * 1000) + 7 * t)
                draw = hard_sampler(steps, cv, rng)
                if name.startswith("ours"):  # as a hunt's first bisection: its confirmation comes after
                    refresh, verify = int(name == "ours +ends"), name == "ours +sandw"
                    most = 1 if name == "ours 1 step" else 4
                    ok, probes, samples, _excl, named = ours(n, want, draw, refresh, verify, broken, most)
                elif name == "git bisect":  # the threshold halfway between one run at each end
                    ends = draw(0, 1)[0], draw(n, 1)[0]
                    ok, probes, samples, named = git_bisect(
                        n, min(want), draw, threshold=(ends[0] + ends[1]) / 2, broken=broken
                    )
                    samples += 2
                    ok = {named[0]} == want
                elif name == "pinpoint all":  # every differing pair explored: several steps named
                    probes, samples, named = pinpoint_explore(n, draw, broken=broken)
                    ok = set(named) == want
                else:  # "x2": 20 samples per change before doubling, accuracy bought with samples
                    start = 20 if name.endswith("x2") else 10
                    ok, probes, samples, named = pinpoint(n, min(want), draw, start=start, broken=broken)
                    ok = {named[0]} == want
                one = bool(named) and set(named) <= want
                rows[name].append((ok, one, probes, samples))
        for name, r in rows.items():
            print(
                f"{label:<16} {n:>4} {cv:>4.2f}  {name:<11} {sum(x[0] for x in r) / len(r):>6.1%} "
                f"{sum(x[1] for x in r) / len(r):>7.1%} {statistics.mean(x[2] for x in r):>7.2f} "
                f"{statistics.mean(x[3] for x in r):>8.1f}"
            )
        print()


REAL_SPEC = """
name = "bisect32"
seed = 32
[history]
filler = 4
[[committed]]
filler = 13
[[committed]]
id = "slow"
subject = "Fuse the shared expert into the routed GEMM"
edits = [{ path = "python/minisglang/models/deepseek_v2.py", effect = { cost = "moe_experts", add_us = 24 } }]
[[committed]]
filler = 18
[launch]
flags = []
[alert]
good = 89
bad = 80
give_good_ref = true
requests = 2
max_tokens = 32
[truth]
culprits = ["slow"]
"""


def real() -> None:
    import json

    from evals.lab.builder import build
    from evals.lab.measure import scenario_bench_config
    from evals.lab.spec import load_spec
    from tools.git import LocalGit
    from tools.host import LocalHost
    from tools.measure import Measurer, Workload

    with tempfile.TemporaryDirectory(prefix="bisect-real-") as tmp:
        spec = Path(tmp) / "bisect32.toml"
        spec.write_text(textwrap.dedent(REAL_SPEC))
        res = build(load_spec(spec), Path(tmp) / "scenario")
        ann, bench = scenario_bench_config(res.root)
        truth = json.loads((res.root / "truth.json").read_text())
        git = LocalGit(res.repo)
        parents = git.rev_list(ann["good_ref"], "HEAD")
        measurer = Measurer(LocalHost(), git, Path(tmp) / "logs")
        probe = measurer.probe_fn(ann["launch_command"], Workload(bench=bench))
        t0 = time.perf_counter()
        out = bisect(parents, ann["good_ref"], res.head_sha, probe, BisectConfig())
        wall = time.perf_counter() - t0
    want = truth["root_causes"][0]["ref"]
    got = [c.sha for c in out.culprits]
    print(
        f"real run: lab history of {len(parents)} commits, culprit {want[:10]}: found {[g[:10] for g in got]} "
        f"({'correct' if got == [want] else 'WRONG'}), probes {out.probes} (bound {log2_bound(len(parents))}), "
        f"samples {out.samples}, verified {out.culprits[0].verified if out.culprits else None}, "
        f"wall {wall:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--hard", action="store_true", help="only the harder cells (heavy tails, drift, steps)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.hard:
        hard(args.trials)
        print(f"(harder part: {time.perf_counter() - t0:.0f} s)")
        return
    synthetic(args.trials)
    print(f"(synthetic part: {time.perf_counter() - t0:.0f} s)\n")
    if not args.no_real:
        real()


if __name__ == "__main__":
    main()
