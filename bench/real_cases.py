"""The real-world suite side by side: ours, a real ``git bisect run`` and Pinpoint's schedule.

    .venv/bin/python bench/real_cases.py [--only NAME] [--skip-pinpoint]

For every case under ``evals/suites/real/`` (each unpacked from its bundle into scratch space):

- ours: the hunt ``sleuth eval`` runs (``evals.job.run_job``: ``--good`` and ``--bench``, nothing
  else told), scored against the culprit;
- git bisect run: a real ``git bisect start BAD GOOD; git bisect run THRESHOLD-SCRIPT`` in a scratch
  clone. The script runs the case's benchmark ONCE and says bad beyond a threshold halfway (the
  geometric mean) between one run at the good commit and one at the bad, as a person would set
  it; a benchmark that fails (the commit does not import) is ``exit 125``, skipped;
- Pinpoint's schedule (``bench/bisect_cost.py``'s ``pinpoint``): on the first-parent line from
  good to bad, 10 samples per change doubling to 160 while undecided, each midpoint compared with
  both ends of its segment. A change whose benchmark fails counts as bad for it (Pinpoint has no
  "skip": a failed build is a failed job), so such ranges show what that costs.

Printed per case: exact (the culprit named), probes (commits measured beyond the two ends; for
git bisect, its steps), samples (benchmark runs, the ends included) and wall seconds. Machines
are noisy: run it on a quiet one, and read the rows side by side (same machine, same run).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bisect_cost import pinpoint

from evals.job import Job, run_job
from evals.realworld import case_git, load_case, unbundle
from evals.runner import score_result

SUITE = Path(__file__).resolve().parents[1] / "evals" / "suites" / "real"
BENCH_TIMEOUT_S = 600


def _run(cmd: str, cwd: Path) -> float | None:
    """One benchmark sample in ``cwd``: its last printed number, or None when it fails."""
    proc = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    if proc.returncode != 0:
        return None
    try:
        return float(proc.stdout.split()[-1])
    except (IndexError, ValueError):
        return None


def _git(repo: Path, *args: str) -> str:
    return case_git(repo, *args).stdout


def ours(spec: Path) -> dict:
    """The hunt ``sleuth eval`` runs, scored by the evaluation's own scorer."""
    t0 = time.perf_counter()
    out = run_job(Job(spec=str(spec), max_probes=40, max_wall_s=3600))
    s = score_result(out)
    if s is None or out.get("error"):
        return {"exact": False, "error": out.get("error"), "wall_s": round(time.perf_counter() - t0, 1)}
    return {
        "exact": s.exact,
        "named": [n[:10] for n in s.named],
        "probes": s.probes,
        "samples": s.samples,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def git_bisect_run(case, case_dir: Path, work: Path) -> dict:
    repo = work / "bisect"
    unbundle(case_dir, case, repo)
    cmd = case.bench.replace("{case}", str(case_dir))
    build = f"({case.setup}) && " if case.setup else ""
    t0 = time.perf_counter()
    ends = {}
    for name, sha in (("good", case.good), ("bad", case.bad)):
        _git(repo, "checkout", "-q", sha)
        ends[name] = _run(build + cmd, repo)
    if ends["good"] is None or ends["bad"] is None:
        return {"exact": False, "error": f"an end does not run: {ends}"}
    threshold = math.sqrt(ends["good"] * ends["bad"])
    bad_if = ">" if case.lower_is_better else "<"
    script = work / "threshold.sh"
    script.write_text(
        "#!/bin/sh\n"
        + (f"({case.setup}) >/dev/null 2>&1 || exit 125\n" if case.setup else "")
        + f"v=$({cmd} 2>/dev/null | tail -n 1) || exit 125\n"
        + '[ -n "$v" ] || exit 125\n'
        + f"python3 -c \"import sys; sys.exit(1 if float('$v') {bad_if} {threshold!r} else 0)\"\n"
    )
    script.chmod(0o755)
    _git(repo, "checkout", "-q", case.bad)
    _git(repo, "bisect", "start", case.bad, case.good)
    proc = subprocess.run(
        ["git", "-C", str(repo), "bisect", "run", str(script)], capture_output=True, text=True, timeout=3600
    )
    log = _git(repo, "bisect", "log")
    steps = sum(1 for line in log.splitlines() if line.startswith("git bisect ") and "start" not in line)
    first_bad = next(
        (line.split()[0] for line in proc.stdout.splitlines() if line.endswith("is the first bad commit")), None
    )
    _git(repo, "bisect", "reset")
    return {
        "exact": first_bad == case.culprit,
        "named": [first_bad[:10]] if first_bad else [],
        "probes": steps,
        "samples": steps + 2,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def pinpoint_schedule(case, case_dir: Path, work: Path) -> dict:
    repo = work / "pinpoint"
    unbundle(case_dir, case, repo)
    line = [case.good, *_git(repo, "rev-list", "--first-parent", "--reverse", f"{case.good}..{case.bad}").split()]
    cmd = case.bench.replace("{case}", str(case_dir))
    failed = 1e9 if case.lower_is_better else 0.0  # a failed job: as far on the bad side as a number goes
    built: dict[int, bool] = {}

    def draw(i: int, k: int) -> list[float]:
        _git(repo, "checkout", "-q", "-f", line[i])
        if case.setup:  # a build per change (its samples reuse it), as Pinpoint builds once per job
            ok = subprocess.run(case.setup, shell=True, cwd=repo, capture_output=True, timeout=BENCH_TIMEOUT_S)
            built[i] = ok.returncode == 0
            if not built[i]:
                return [failed] * k
        return [v if (v := _run(cmd, repo)) is not None else failed for _ in range(k)]

    t0 = time.perf_counter()
    culprit_index = line.index(case.culprit) if case.culprit in line else -1
    ok, probes, samples, named = pinpoint(len(line) - 1, culprit_index, draw)
    return {
        "exact": ok,
        "named": [line[n][:10] for n in named],
        "probes": probes,
        "samples": samples,
        "wall_s": round(time.perf_counter() - t0, 1),
        "on_first_parent_line": culprit_index >= 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--skip-pinpoint", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="each case this many times (noisy cases vary)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = []
    specs = [s for s in sorted(SUITE.glob("*/case.toml")) if not args.only or s.parent.name in args.only]
    for spec in [s for s in specs for _ in range(args.repeat)]:
        case = load_case(spec)
        with tempfile.TemporaryDirectory(prefix=f"real-{case.name}-") as tmp:
            row = {
                "case": case.name,
                "ours": ours(spec),
                "git bisect run": git_bisect_run(case, spec.parent, Path(tmp)),
            }
            if not args.skip_pinpoint:
                row["pinpoint"] = pinpoint_schedule(case, spec.parent, Path(tmp))
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| case | method | exact | probes | samples | wall |\n| --- | --- | :---: | ---: | ---: | ---: |")
    for row in rows:
        for method in ("ours", "git bisect run", "pinpoint"):
            r = row.get(method)
            if r:
                print(
                    f"| `{row['case']}` | {method} | {'yes' if r['exact'] else 'no'} | {r.get('probes', '-')} "
                    f"| {r.get('samples', '-')} | {r.get('wall_s', '-')} s |"
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
