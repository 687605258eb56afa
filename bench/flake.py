"""The flake meter: the default test suite N times beside a CPU hog, each test's failure rate.

    .venv/bin/python bench/flake.py [--runs 10] [--hogs 2] [--pytest-args "-k real_node"]

A test that fails once under load and passes again is a bug in the test or the code (a verdict
that hangs on wall-clock noise): this finds them. Each run is the README's test command
(``pytest -q``, its four workers) with ``--hogs`` busy-loop processes beside it (one per core by
default: the load CI's machine may have from its neighbours), writing JUnit XML; the table sums
them: per test, runs, failures and the slowest call; then the slowest tests overall. Exit 1 when
any test failed in any run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hog() -> None:
    while True:
        pass


def one_run(xml: Path, extra: list[str], hogs: int) -> tuple[int, float]:
    """The default suite once, with ``hogs`` busy loops beside it; (exit code, wall seconds)."""
    burners = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for b in burners:
        b.start()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *extra],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        for b in burners:
            b.terminate()
            b.join()
    return proc.returncode, time.monotonic() - t0


def read_junit(xml: Path) -> dict[str, tuple[bool, float]]:
    """``{test id: (failed, seconds)}`` from one run's JUnit XML (skipped tests left out)."""
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        name = f"{case.get('classname')}::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        out[name] = (failed, float(case.get("time") or 0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy-loop processes beside the suite")
    ap.add_argument("--pytest-args", default="", help="more pytest arguments (e.g. -k NAME)")
    ap.add_argument("--slowest", type=int, default=12)
    args = ap.parse_args()
    runs: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="flake-") as tmp:
        for i in range(args.runs):
            xml = Path(tmp) / f"run{i}.xml"
            code, wall = one_run(xml, shlex.split(args.pytest_args), args.hogs)
            got = read_junit(xml) if xml.exists() else {}
            for name, r in got.items():
                runs[name].append(r)
            failed = sorted(n for n, (f, _) in got.items() if f)
            print(f"run {i + 1}/{args.runs}: exit {code}, {wall:.0f} s, {len(got)} tests, {len(failed)} failed "
                  + (f"({', '.join(failed)})" if failed else ""), flush=True)  # fmt: skip
    flaky = {n: rs for n, rs in runs.items() if any(f for f, _ in rs)}
    print(f"\n{len(runs)} tests, {args.runs} runs beside {args.hogs} busy loops; failed at least once: {len(flaky)}")
    for name, rs in sorted(flaky.items(), key=lambda kv: -sum(f for f, _ in kv[1])):
        print(f"  {sum(f for f, _ in rs)}/{len(rs)}  {name}")
    print(f"\nslowest (worst run of each, {args.slowest}):")
    worst = sorted(((max(t for _, t in rs), n) for n, rs in runs.items()), reverse=True)[: args.slowest]
    for t, name in worst:
        print(f"  {t:7.1f} s  {name}")
    return 1 if flaky else 0


if __name__ == "__main__":
    sys.exit(main())
