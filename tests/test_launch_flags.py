"""A launch flag changed since the good run: the flag named, and what a person does to restore it."""

from __future__ import annotations

import json

from agent.categories.config import action, flag_changes, launch_flags
from agent.state import Hunt, Target

GOOD = "exec {worktree}/serve.sh --port {port} --tp 2 --mem-fraction=0.8 --enable-metrics"


def test_flags_are_read_with_their_values_whichever_way_they_are_written():
    assert launch_flags(GOOD) == {"--port": "{port}", "--tp": "2", "--mem-fraction": "0.8", "--enable-metrics": None}


def test_a_flag_added_removed_or_set_to_another_value_is_each_said_as_what_restores_it():
    now = "exec {worktree}/serve.sh --port {port} --tp 2 --mem-fraction 0.9 --disable-cuda-graph"
    assert flag_changes(GOOD, now) == [
        ("--disable-cuda-graph", "drop --disable-cuda-graph"),
        ("--enable-metrics", "add back --enable-metrics"),
        ("--mem-fraction", "set --mem-fraction back to 0.8 (now 0.9)"),
    ]
    # a value alone changed was no flag at all: the hunt named "flags"
    assert [f for f, _ in flag_changes("s --tp 2", "s --tp 4")] == ["--tp"]


def test_the_proposed_restore_says_to_drop_a_flag_the_bad_launch_added_and_gives_the_good_launch():
    """A trial's approval said "launch with the good flags (--disable-cuda-graph)" for a flag to
    drop: it read as one to add."""
    target = Target(repo="/r", launch=GOOD + " --disable-cuda-graph", good_launch=GOOD)
    hunt = Hunt(run_id="r", target=target, root_kind="config", root_ref="--disable-cuda-graph")
    a = action(hunt)
    assert a.kind == "restore" and a.ref == "--disable-cuda-graph"
    assert a.detail == f"drop --disable-cuda-graph (the good run's launch: `{GOOD}`)"


def test_an_approval_says_each_step_on_stderr_and_a_flag_restore_says_what_to_do(tmp_path):
    """A trial's reviewer watched `sleuth approve` print nothing for its minute of work; the lab's
    launch-flag world, hunted and approved: the step is said, with what a person does by hand."""
    from pathlib import Path

    from evals.lab.builder import build
    from evals.lab.spec import load_spec
    from tests.conftest import sleuth_in_process

    spec = Path(__file__).resolve().parents[1] / "evals" / "suites" / "core" / "launch_flag.toml"
    lab = build(load_spec(spec), tmp_path / "lab")
    db = tmp_path / "r.db"
    v = json.loads(sleuth_in_process("hunt", "--alert", lab.root / "alert.json", "--db", db, "--json").stdout)
    assert v["status"] == "awaiting_approval" and v["proposed_action"]["kind"] == "restore", v["summary"]
    approved = sleuth_in_process("approve", v["run_id"], "--db", db)
    assert approved.returncode == 0, approved.stderr[-2000:]
    assert "s] approved; to do by hand: drop --disable-cuda-graph (the good run's launch: `" in approved.stderr
