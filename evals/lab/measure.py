"""Measure a built scenario at a given state: export the tree, launch its server, benchmark it.

States are exported with ``git archive`` (plus, for the working tree, a copy of the checkout),
so measuring never touches the scenario repo's checkout, index or uncommitted work.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from agent.alerts import bench_config, read_alert
from tools.bench import BenchConfig, BenchResult, run_bench
from tools.server import launch
from tools.stats import Summary, summarize

SPEC_FLAGS = ("--speculative-algorithm", "--speculative-num-steps")


def export_ref(repo: Path, ref: str, dest: Path) -> Path:
    """Write the tree of ``ref`` into ``dest`` (read-only on the repo)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def export_worktree(repo: Path, dest: Path) -> Path:
    """Copy the checkout as it is, uncommitted changes included (``.git`` left out)."""
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    return dest


def baseline_command(template: str) -> str:
    """The alert's launch command with speculative decoding switched off."""
    words = template.split(" ")
    out: list[str] = []
    skip = 0
    for w in words:
        if skip:
            skip -= 1
            continue
        if w in SPEC_FLAGS:
            skip = 1
            continue
        out.append(w)
    return " ".join(out)


class StateMeasurement(BaseModel):
    label: str
    tok_per_s: list[float]
    verify_ms: list[float]
    summary: Summary
    startup_s: float


def measure_state(
    tree: Path,
    command: str,
    label: str,
    log_path: Path,
    samples: int,
    bench: BenchConfig,
    on_sample: Callable[[str, BenchResult], None] | None = None,
) -> StateMeasurement:
    """Launch once, take ``samples`` benchmark samples, stop."""
    toks: list[float] = []
    verify: list[float] = []
    with launch(command, tree, log_path) as server:
        cfg = bench.model_copy(update={"endpoint": f"{server.base_url}/v1"})
        for _ in range(samples):
            res = run_bench(cfg, server=server)
            if res.errors:
                raise RuntimeError(f"{label}: {res.errors} request(s) failed: {res.samples[0].error}")
            toks.append(res.tok_per_s)
            if res.verify_ms is not None:
                verify.append(res.verify_ms)
            if on_sample is not None:
                on_sample(label, res)
        startup = server.startup_s
    return StateMeasurement(label=label, tok_per_s=toks, verify_ms=verify, summary=summarize(toks), startup_s=startup)


class State(BaseModel):
    """One side of an interleaved comparison: a tree, its launch command, a label, its server log."""

    tree: Path
    command: str
    label: str
    log_path: Path


def measure_interleaved(a: State, b: State, samples: int, bench: BenchConfig) -> tuple[StateMeasurement, ...]:
    """A, then B, then A again (half of A's samples each time), one server at a time as on a GPU
    node (two TP-8 servers do not fit): the two sides share a time centre, so a change in the
    machine's load (another test, a CI neighbour) lands on both instead of on whichever came second."""
    first = samples // 2
    parts = [measure_state(a.tree, a.command, a.label, a.log_path, first, bench)] if first else []
    mid = measure_state(b.tree, b.command, b.label, b.log_path, samples, bench)
    log_again = a.log_path.with_name(a.log_path.stem + "-again" + a.log_path.suffix)
    parts.append(measure_state(a.tree, a.command, a.label, log_again, samples - first, bench))
    toks = [x for p in parts for x in p.tok_per_s]
    side_a = StateMeasurement(
        label=a.label,
        tok_per_s=toks,
        verify_ms=[x for p in parts for x in p.verify_ms],
        summary=summarize(toks),
        startup_s=parts[0].startup_s,
    )
    return side_a, mid


def scenario_bench_config(root: Path) -> tuple[dict, BenchConfig]:
    """The alert's annotations and the benchmark it describes."""
    ann, _labels = read_alert(root / "alert.json")
    return ann, bench_config(ann, str(root / "alert.json"))


def scratch_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
