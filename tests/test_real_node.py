"""A real GPU node is harder than a laptop: one server at a time, servers that crash or hang, a
wall budget that must hold mid-probe, commits that need a build. These are the hunts that show it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from evals.fingerprint import leftovers
from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import sleuth_in_process

CORE = Path(__file__).parent.parent / "evals" / "suites" / "core"


def test_a_server_that_hangs_on_its_first_request_ends_the_hunt_at_its_wall_budget(write_spec, tmp_path):
    """No watchdog: every request waits forever. The hunt stops the probe at the budget (server
    group killed, worktree removed) and ends inconclusive with what it learned, within seconds."""
    spec = (
        (CORE / "hang_in_allreduce.toml").read_text().replace('"--watchdog-timeout", "10"', '"--watchdog-timeout", "0"')
    )
    assert '"--watchdog-timeout", "0"' in spec
    scen = build(load_spec(write_spec(spec, "hang.toml")), tmp_path / "s")
    budget = 15.0
    t0 = time.monotonic()
    r = sleuth_in_process(
        "hunt", "--alert", scen.root / "alert.json", "--max-wall", budget, "--json", "--db", tmp_path / "runs.db"
    )  # fmt: skip
    took = time.monotonic() - t0
    v = json.loads(r.stdout)
    assert r.returncode == 1 and v["status"] == "inconclusive", v
    assert "wall-time budget" in v["error"] and "mid-probe" in v["error"]
    assert took < budget + 5, f"the hunt ran {took:.1f} s on a {budget:.0f} s budget"
    assert leftovers(scen.root, scen.repo) == ([], [])
    assert v["cost"]["launches"] >= 1 and v["cost"]["device_s"] > 0


@pytest.mark.parametrize(
    ("scenario", "said"),
    [("crash_on_request", "NameError: name 'step_metrics' is not defined"), ("hang_in_allreduce", "watchdog timeout")],
)
def test_a_head_that_does_not_serve_is_hunted_to_the_commit_that_broke_it(scenario, said, tmp_path):
    scen = build(load_spec(CORE / f"{scenario}.toml"), tmp_path / "s")
    truth = json.loads((scen.root / "truth.json").read_text())
    r = sleuth_in_process(
        "hunt", "--alert", scen.root / "alert.json", "--max-wall", 240, "--json", "--db", tmp_path / "runs.db"
    )  # fmt: skip
    v = json.loads(r.stdout)
    why = [v["summary"], v.get("regression"), [h["reason"] for h in v["hypotheses"]], v.get("broken")]
    assert v["status"] == "awaiting_approval", why
    assert v["root_cause"]["kind"] == "commit" and v["root_cause"]["ref"] == truth["root_causes"][0]["ref"]
    assert "breaks the server" in v["root_cause"]["summary"]
    assert v["regression"]["broken"]  # what HEAD does: from its own log
    assert any(said in (b["failure"] or "") for b in v["broken"]), v["broken"]
    assert "HEAD+revert serves" in v["hypotheses"][0]["reason"] or v["proposed_action"]["kind"] == "revert"
    assert leftovers(scen.root, scen.repo) == ([], [])


def _built_lib(tmp_path):
    """A project with a build step (``sh build.sh``: fails while a file BROKEN exists) and a
    benchmark of its one number; its first commit. Returns (repo, git, that commit)."""
    repo = tmp_path / "lib"
    repo.mkdir()

    def git(*a: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *a],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip

    git("init", "-q")
    (repo / "bench.py").write_text("import random, lib; print(lib.COST * random.gauss(1, 0.005))\n")
    (repo / "lib.py").write_text("COST = 1.0\n")
    (repo / "build.sh").write_text("test ! -e BROKEN || { echo 'error: missing header lib.h' >&2; exit 1; }\n")
    git("add", ".")
    git("commit", "-qm", "init")
    return repo, git, git("rev-parse", "HEAD")


def _hunt_built_lib(repo, good: str, tmp_path) -> dict:
    r = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--good-value", "1.0", "--samples", "3", "--setup", "sh build.sh", "--json", "--db", tmp_path / "runs.db",
    )  # fmt: skip
    return json.loads(r.stdout)


def test_commits_whose_setup_fails_are_skipped_listed_and_never_blamed(tmp_path):
    """A build step per probe (``--setup``): a commit it fails on is unbuildable, not a culprit."""
    repo, git, good = _built_lib(tmp_path)
    for i in range(4):  # a stretch that does not build
        (repo / "BROKEN").write_text(f"{i}\n")
        git("add", ".")
        git("commit", "-qm", f"wip {i}")
    (repo / "BROKEN").unlink()
    git("commit", "-qam", "fix the build")
    (repo / "lib.py").write_text("COST = 2.0\n")
    git("commit", "-qam", "the slow one")
    culprit = git("rev-parse", "HEAD")
    for i in range(2):
        (repo / f"doc{i}.md").write_text("docs\n")
        git("add", ".")
        git("commit", "-qm", f"docs {i}")
    v = _hunt_built_lib(repo, good, tmp_path)
    assert v["root_cause"]["ref"] == culprit, v
    unbuildable = [b for b in v["broken"] if b["how"] == "does not build"]
    assert unbuildable and all("missing header" in b["failure"] for b in unbuildable)
    assert v["cost"]["build_s"] > 0 and v["cost"]["launches"] == 0  # a benchmark command launches nothing


def test_a_culprit_next_to_an_unbuildable_commit_is_named_likely_with_that_commit_said(tmp_path):
    """The slow change lands in the commit that fixes a build its parent broke: the parent cannot
    be measured, so it may be the first bad commit, and the verdict says so. Reverting the culprit
    at HEAD breaks the build again and its parent does not build: no A/B can confirm it, which
    leaves it ``likely`` (not a failed hunt, not a refutation) and the fix a person's."""
    repo, git, good = _built_lib(tmp_path)
    for i in range(3):
        (repo / f"doc{i}.md").write_text("docs\n")
        git("add", ".")
        git("commit", "-qm", f"docs {i}")
    (repo / "BROKEN").write_text("x\n")
    (repo / "lib.py").write_text("COST = 1.0  # refactor in progress\n")
    git("add", ".")
    git("commit", "-qm", "wip: half a refactor")
    wip = git("rev-parse", "HEAD")
    (repo / "BROKEN").unlink()
    (repo / "lib.py").write_text("COST = 2.0  # refactor done\n")
    git("add", "-A")
    git("commit", "-qm", "finish the refactor")
    culprit = git("rev-parse", "HEAD")
    (repo / "doc9.md").write_text("docs\n")
    git("add", ".")
    git("commit", "-qm", "docs 9")
    v = _hunt_built_lib(repo, good, tmp_path)
    assert v["status"] == "concluded" and v["error"] is None, v
    cause = v["root_cause"]
    assert cause["ref"] == culprit and cause["evidence"] == "likely", cause
    assert f"{wip[:10]} could not be measured (skipped) and borders it" in cause["summary"]
    action = v["proposed_action"]
    assert action["kind"] == "investigate" and "does not build" in action["detail"], action
    assert git("status", "--porcelain") == "" and git("rev-parse", "HEAD") != culprit  # the checkout untouched


def test_a_targets_slots_timeout_and_setup_reach_the_hunt_through_the_alert(tmp_path):
    """``targets.toml`` names what a Prometheus rule does not know: the host's slots, its launch
    timeout and the per-probe build; the service writes them into the alert the hunt reads."""
    from agent.hunt_cmd import target_from_alert
    from agent.serve.config import ServeTarget

    t = ServeTarget(
        name="n1", match={"host": "gpu-node-1"}, repo="/srv/sglang", launch="L {worktree} {port}",
        benchmark="sleuth bench --model M", slots=2, launch_timeout=2400, setup="pip install -e python/",
        busy_wait=0,
    )  # fmt: skip
    labels, ann = t.complete({"host": "gpu-node-1"}, {"good_value": "94"})
    (tmp_path / "a.json").write_text(json.dumps({"labels": labels, "annotations": ann}))
    target = target_from_alert(tmp_path / "a.json", None)
    assert (target.slots, target.launch_timeout_s, target.setup) == (2, 2400.0, "pip install -e python/")
    assert target.busy_wait_s == 0  # this node's launches never wait for GPUs someone else holds
    del ann["busy_wait"]
    (tmp_path / "c.json").write_text(json.dumps({"labels": labels, "annotations": ann}))
    assert target_from_alert(tmp_path / "c.json", None).busy_wait_s == 600  # the default
    for key, value, said in (
        ("slots", "zero", "annotations.slots: 'zero' is not a positive number"),
        ("busy_wait", "-5", "annotations.busy_wait: '-5' is not a number of seconds >= 0"),
    ):
        (tmp_path / "b.json").write_text(json.dumps({"labels": labels, "annotations": ann | {key: value}}))
        r = sleuth_in_process("hunt", "--alert", tmp_path / "b.json", "--db", tmp_path / "r.db")
        assert r.returncode == 2 and said in r.stdout + r.stderr, r.stdout + r.stderr
    r = sleuth_in_process("hunt", "--alert", tmp_path / "c.json", "--busy-wait", "-1", "--db", tmp_path / "r.db")
    assert r.returncode == 2 and "--busy-wait" in r.stdout + r.stderr
