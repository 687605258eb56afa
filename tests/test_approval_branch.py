"""An approved revert lands as a new branch; a branch of that name that already exists elsewhere is
refused before anything is recorded (exit 2), and the run still awaits a decision."""

from __future__ import annotations

import json

from tests.conftest import git_in, sleuth_in_process
from tests.test_failing_runs import _hunt, _project


def test_an_approval_whose_branch_name_is_taken_is_refused_and_the_run_still_waits(tmp_path):
    repo, good, culprit = _project(tmp_path, "", only_culprit_in_lib=True)
    git = git_in(repo)
    v = _hunt(repo, good, tmp_path)
    assert v["status"] == "awaiting_approval" and v["proposed_action"]["branch"] == f"sleuth/revert-{culprit[:10]}"
    git("branch", f"sleuth/revert-{culprit[:10]}", good)  # an earlier approval's, or a person's own
    db = tmp_path / "runs.db"

    refused = sleuth_in_process("approve", v["run_id"], "--db", db, "--json")
    assert refused.returncode == 2
    assert f"error: RUN: branch 'sleuth/revert-{culprit[:10]}' already exists in {repo} (at {good[:10]})" in (
        refused.stdout + refused.stderr
    )
    checked_out = git("rev-parse", "--abbrev-ref", "HEAD")  # the person's own branch
    taken = sleuth_in_process("approve", v["run_id"], "--branch", checked_out, "--db", db, "--json")
    assert taken.returncode == 2 and f"error: --branch: branch '{checked_out}' already exists" in (
        taken.stdout + taken.stderr
    )
    assert git("rev-parse", f"sleuth/revert-{culprit[:10]}") == good  # untouched
    # A name git does not take is refused the same way: it was recorded, then failed the proven run.
    for bad in ("bad..name", "has space"):
        wrong = sleuth_in_process("approve", v["run_id"], "--branch", bad, "--db", db, "--json")
        said = wrong.stdout + wrong.stderr
        assert wrong.returncode == 2 and f"error: --branch: '{bad}' is not a valid branch name" in said, said

    # A name a tag already has: the branch would be made, but the re-measurement looked the name up
    # and measured the tagged HEAD ("0 % of the drop recovered"). A ref path made
    # refs/heads/refs/heads/main. Both refused.
    git("tag", "v0.5.4", "HEAD")
    shadowed = sleuth_in_process("approve", v["run_id"], "--branch", "v0.5.4", "--db", db, "--json")
    assert shadowed.returncode == 2 and "error: --branch: a tag 'v0.5.4' exists" in shadowed.stdout + shadowed.stderr
    path = sleuth_in_process("approve", v["run_id"], "--branch", "refs/heads/main", "--db", db, "--json")
    assert path.returncode == 2 and "'refs/heads/main' is a ref path" in path.stdout + path.stderr
    # A rejection says why, as the page's form does.
    blank = sleuth_in_process("reject", v["run_id"], "--reason", " ", "--db", db)
    assert blank.returncode == 2 and "error: --reason: a rejection says why" in blank.stdout + blank.stderr
    # The repository moved away since the hunt: one line, nothing recorded (a 112-line traceback).
    moved = repo.with_name("moved")
    repo.rename(moved)
    gone = sleuth_in_process("approve", v["run_id"], "--db", db, "--json")
    moved.rename(repo)
    said = gone.stdout + gone.stderr
    assert gone.returncode == 2 and f"error: RUN: the run's repository {repo}:" in said
    assert "nothing was recorded" in said

    landed = sleuth_in_process("approve", v["run_id"], "--branch", "perf/revert-slow", "--db", db, "--json")
    assert landed.returncode == 0, landed.stdout[-2000:]
    after = json.loads(landed.stdout)
    assert after["proposed_action"]["status"] == "applied" and after["proposed_action"]["branch"] == "perf/revert-slow"
    assert git("rev-parse", "perf/revert-slow") == after["proposed_action"]["revert_sha"]
    # Re-measured by the commit that landed, beside HEAD, under a label of its own (the Numbers'
    # HEAD row, the confirmation's, is not replaced by the re-measured one).
    run = json.loads(sleuth_in_process("show", v["run_id"], "--json", "--db", db).stdout)
    by_id = {m["mid"]: m for m in run["measurements"]}
    assert by_id[after["after"]["measurement"]]["ref"] == after["proposed_action"]["revert_sha"]
    assert by_id[after["after"]["before_measurement"]]["label"] == "HEAD, re-measured"
    assert after["after"]["recovered_pct_of_drop"] > 50 and after["after"]["verdict"] == "different"


def test_a_culprit_whose_revert_conflicts_only_in_files_no_run_executes_is_reverted_without_them(tmp_path):
    """A trial's fork: the culprit's revert at HEAD conflicted in CHANGELOG and a test that a later
    commit edited, and the hunt ended "revert by hand (nothing to approve)" after an A/B of the
    culprit against its parent, which says nothing of HEAD. Those files stay as at HEAD, the rest
    is reverted and A/B-tested at HEAD, and the approved branch holds it."""
    from tests.conftest import BENCH, bench_repo, hunt_bench

    repo, git, good = bench_repo(tmp_path / "fork", BENCH, {"lib.py": "COST = 1.0\n", "CHANGELOG": "- start\n"})
    for i in range(1, 7):
        if i == 3:
            (repo / "lib.py").write_text("COST = 2.0\n")
            (repo / "CHANGELOG").write_text("- cost doubled\n")
        elif i == 5:
            (repo / "CHANGELOG").write_text("- cost doubled (our fork's note)\n")
        else:
            (repo / f"notes{i}.txt").write_text(f"{i}\n")
        git("add", ".")
        git("commit", "-qm", f"change {i}")
    culprit = git("rev-list", "--reverse", f"{good}..HEAD").split()[2]
    db = tmp_path / "runs.db"
    v = hunt_bench(repo, good, db)
    assert v["status"] == "awaiting_approval" and v["root_cause"]["ref"] == culprit, v
    said = "the revert conflicts in CHANGELOG, which no run executes: kept as at HEAD"
    assert said in v["proposed_action"]["detail"] and v["proposed_action"]["kind"] == "revert"
    report = sleuth_in_process("show", v["run_id"], "--db", db).stdout  # the confirmation A/B: HEAD vs HEAD+revert
    assert f"{said}: HEAD " in report and "HEAD+revert" in report, report

    approved = sleuth_in_process("approve", v["run_id"], "--db", db, "--json")
    assert approved.returncode == 0, approved.stderr[-2000:]
    branch = f"sleuth/revert-{culprit[:10]}"
    assert git("show", f"{branch}:lib.py") == "COST = 1.0"
    assert git("show", f"{branch}:CHANGELOG") == "- cost doubled (our fork's note)"
    assert git("rev-parse", f"{branch}^") == git("rev-parse", "HEAD") and not git("status", "--porcelain")


def test_a_partial_revert_that_keeps_code_asks_for_the_projects_tests():
    """Trial 20: the revert kept tests/test_format.py as at HEAD (no run executes it), which still
    tested what the revert undid: the approved branch failed 2 of the project's tests, unwarned."""
    from agent.categories.history import kept_said

    plan = {"kept": ["CHANGELOG", "tests/test_format.py"]}
    proposal = kept_said(plan, end="")
    assert proposal.endswith("(run the project's tests: tests/test_format.py may test the reverted change)")
    assert "run the project's tests" not in kept_said({"kept": ["CHANGELOG"]}, end="")
    assert kept_said(plan).endswith("kept as at HEAD: ")  # before the A/B's numbers: no advice there
