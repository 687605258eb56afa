"""Kill -9 anywhere, many times: seeded random kill points over a lab hunt and its approval.

    .venv/bin/python bench/kill9.py [--draws 20] [--kills 4] [--spec evals/suites/core/pull_range.toml]

Each draw builds the scenario afresh, hunts it with real ``sleuth`` processes SIGKILLed at the
drawn points (``evals.killnine``), restarts what a person would, and checks every promise of the
harness. Prints, per draw, where each kill fell and what was violated; then the counts: kills per
phase, draws with a violation, and the wall time per draw.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import numpy as np

    from evals.fingerprint import fingerprint
    from evals.killnine import draw, run_with_kills, violations
    from evals.lab.builder import build
    from evals.lab.spec import load_spec
    from tests.conftest import MINIMAL_SPEC

    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--spec", type=Path, help="a lab spec with one culprit commit (default: the tests' tiny one)")
    ap.add_argument("--hunt-events", type=int, default=90, help="events of an undisturbed hunt (kill range)")
    args = ap.parse_args()
    os.environ.setdefault("SLEUTH_LAB_LAUNCH_SCALE", "0.02")
    phases: collections.Counter[str] = collections.Counter()
    failed, walls = 0, []
    for i in range(args.draws):
        with tempfile.TemporaryDirectory(prefix="kill9-") as tmp:
            spec = args.spec or Path(tmp) / "tiny.toml"
            if args.spec is None:
                spec.write_text(MINIMAL_SPEC)
            res = build(load_spec(spec), Path(tmp) / "scenario")
            before = fingerprint(res.repo)
            kills = draw(np.random.default_rng(5000 + i), args.hunt_events, 12, args.kills)
            t0 = time.monotonic()
            out = run_with_kills(res.root / "alert.json", Path(tmp) / "r.db", kills)
            bad = violations(out, Path(tmp) / "r.db", res.truth, res.repo, res.root, before)
            walls.append(time.monotonic() - t0)
        phases.update(k.split("@")[0] + " in " + k.split("@")[1] for k in out.kills)
        failed += bool(bad)
        print(f"draw {i:>2}: kills {', '.join(out.kills) or '-'}; {'OK' if not bad else 'VIOLATED: ' + '; '.join(bad)}")
    print(f"\n{args.draws} draws, {sum(phases.values())} kills; draws with a violation: {failed}")
    for phase, n in phases.most_common():
        print(f"  {n:>3}  {phase}")
    print(f"wall per draw: median {sorted(walls)[len(walls) // 2]:.0f} s, max {max(walls):.0f} s")


if __name__ == "__main__":
    main()
