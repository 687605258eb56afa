"""A benchmark run that fails in the middle of a hunt (exits non-zero, outlasts its timeout) is a
finding the verdict reports, never a crashed ("failed") hunt: at an end of the bisection range the
hunt stops inconclusive and says why; in the confirmation the culprit is proven another way."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git_in, sleuth_in_process

# One number per run, from lib.COST; the run fails (exit 1) where ``FAILS`` says, which the bench
# decides from the commit subject of the checkout it runs in.
BENCH = """\
import pathlib, random, subprocess, sys
import lib
subject = subprocess.run(["git", "log", "-1", "--format=%s"], capture_output=True, text=True).stdout.strip()
marker = pathlib.Path({marker!r})
{fails}
print(lib.COST * random.gauss(1, 0.005))
"""


def _project(tmp_path: Path, fails: str, only_culprit_in_lib: bool) -> tuple[Path, str, str]:
    """init (good), six commits of which ``change 3`` doubles the cost; the others touch notes
    files (``only_culprit_in_lib``: the bisection prunes them) or lib.py's comment line (each is
    probed). Returns (repo, good, culprit)."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git = git_in(repo)
    git("init", "-q")
    (repo / "bench.py").write_text(BENCH.format(marker=str(tmp_path / "marker"), fails=fails))
    (repo / "lib.py").write_text("COST = 1.0\n")
    git("add", ".")
    git("commit", "-qm", "init")
    good = culprit = git("rev-parse", "HEAD")
    for i in range(1, 7):
        if i == 3 or not only_culprit_in_lib:  # alone in lib.py, its revert is clean
            (repo / "lib.py").write_text(
                f"COST = {2.0 if i >= 3 else 1.0}\n" + ("" if only_culprit_in_lib else f"# {i}\n")
            )
        else:
            (repo / f"notes{i}.txt").write_text(f"{i}\n")
        git("add", ".")
        git("commit", "-qm", f"change {i}")
        if i == 3:
            culprit = git("rev-parse", "HEAD")
    return repo, good, culprit


def _hunt(repo: Path, good: str, tmp_path: Path) -> dict:
    r = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--good-value", "1.0", "--samples", "3", "--json", "--db", tmp_path / "runs.db",
    )  # fmt: skip
    return json.loads(r.stdout)


def test_a_benchmark_that_fails_at_head_with_the_culprit_reverted_is_confirmed_against_its_parent(tmp_path):
    """The prepared revert's checkout cannot run the benchmark (here: it exits 1 there, as a
    benchmark that needs a file the culprit added would): the A/B is taken once more, then the
    culprit is proven against its own parent, and the fix is a person's."""
    fails = "if subject.startswith('Revert'):\n    sys.exit('needs a file the revert removed')"
    repo, good, culprit = _project(tmp_path, fails, only_culprit_in_lib=True)
    v = _hunt(repo, good, tmp_path)
    assert v["status"] == "concluded" and v["error"] is None, v
    cause = v["root_cause"]
    assert cause["ref"] == culprit and cause["evidence"] == "proven", cause
    assert "benchmark command exit 1" in v["proposed_action"]["detail"], v["proposed_action"]
    assert v["proposed_action"]["kind"] == "investigate"


def test_an_end_of_the_range_that_stops_running_mid_bisection_ends_the_hunt_inconclusive_with_the_reason(
    tmp_path,
):
    """The known-good commit runs for the history A/B, then fails once the bisection has probed
    inside the range (a fresh sample of each end is taken beside every probe): the hunt is
    inconclusive, names the end and the failure, and keeps what the A/B showed."""
    fails = (
        "if subject not in ('init', 'change 6'):\n    marker.touch()\n"
        "if subject == 'init' and marker.exists():\n    sys.exit('the good commit stopped running')"
    )
    repo, good, _culprit = _project(tmp_path, fails, only_culprit_in_lib=False)
    v = _hunt(repo, good, tmp_path)
    assert v["status"] == "inconclusive" and v["root_cause"] is None, v
    why = v["error"]
    assert f"the bisection could not finish: the good reference {good[:10]} cannot be measured" in why, v
    assert "benchmark command exit 1" in why, why
    history = next(h for h in v["hypotheses"] if h["category"] == "history")
    assert history["status"] == "supported" and why in history["reason"], history  # what the A/B showed stands
    assert git_in(repo)("status", "--porcelain") == ""


def test_an_approved_revert_that_no_longer_runs_is_reported_not_re_measured_with_the_reason(tmp_path):
    """Hours after the hunt, the person approves; by then the revert's checkout cannot run the
    benchmark (here a marker file makes it exit 1 there). The branch is applied as approved, the
    re-measurement says why it could not be taken, and the run ends concluded, not failed."""
    fails = "if subject.startswith('Revert') and marker.exists():\n    sys.exit('the runner image changed')"
    repo, good, culprit = _project(tmp_path, fails, only_culprit_in_lib=True)
    v = _hunt(repo, good, tmp_path)
    assert v["status"] == "awaiting_approval" and v["proposed_action"]["kind"] == "revert", v
    (tmp_path / "marker").touch()
    proc = sleuth_in_process("approve", v["run_id"], "--db", tmp_path / "runs.db", "--json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    after = json.loads(proc.stdout)
    assert after["status"] == "concluded" and after["proposed_action"]["status"] == "applied", after
    assert after["after"]["measurement"] is None and "benchmark command exit 1" in after["after"]["error"], after
    report = (tmp_path / "runs" / v["run_id"] / "report.md").read_text()
    assert "| after the approved revert | not measured |" in report, report
    assert f"refs/heads/sleuth/revert-{culprit[:10]}" in git_in(repo)("for-each-ref", "--format=%(refname)")


def test_a_benchmark_that_cannot_run_now_ends_the_hunt_inconclusive_with_its_error_line(tmp_path):
    """Nothing to compare with when the working tree's benchmark fails: the hunt stops at once,
    inconclusive, with the failing command's last line, and leaves the checkout as it was."""
    fails = "if subject == 'change 6':\n    sys.exit('ModuleNotFoundError: No module named numpy')"
    repo, good, _culprit = _project(tmp_path, fails, only_culprit_in_lib=True)
    v = _hunt(repo, good, tmp_path)
    assert v["status"] == "inconclusive" and v["hypotheses"] == [], v
    assert v["error"].startswith("the working tree cannot be measured: benchmark command exit 1"), v["error"]
    assert "No module named numpy" in v["error"]
    assert git_in(repo)("status", "--porcelain") == ""


def test_a_commit_whose_benchmark_fails_mid_bisection_is_listed_with_the_states_that_did_not_run(tmp_path):
    """A probe whose benchmark exits non-zero is skipped by the bisection, and the verdict's
    ``broken`` lists it with how and why (it said "could not be measured" in the summary only, and
    ``broken`` stayed empty: that list had only servers that did not start and builds that failed)."""
    fails = "if subject == 'change 2':\n    sys.exit('SyntaxError: change 2 does not import')"
    repo, good, culprit = _project(tmp_path, fails, only_culprit_in_lib=False)
    parent = git_in(repo)("rev-parse", f"{culprit}^")
    v = _hunt(repo, good, tmp_path)
    assert parent[:10] in v["root_cause"]["summary"], v["root_cause"]
    listed = [b for b in v["broken"] if b["ref"] == parent[:10]]
    assert listed and listed[0]["how"] == "benchmark command exit 1", v["broken"]
    assert listed[0]["failure"] == "SyntaxError: change 2 does not import", listed
    # Its parent unmeasured, the culprit is likely, not proven: checking it is a person's to do,
    # and an approval says so (it said only "is not awaiting approval").
    assert v["proposed_action"]["kind"] == "investigate", v["proposed_action"]
    refused = sleuth_in_process("approve", v["run_id"], "--db", tmp_path / "runs.db")
    assert refused.returncode == 2, refused.stdout
    assert "is not awaiting approval (its action is for a person to do, nothing to approve: " in refused.stderr


def test_a_commit_whose_benchmark_hangs_mid_bisection_is_listed_with_how_long_it_was_given(tmp_path):
    """A probe whose benchmark outlasts its timeout is skipped by the bisection, and the verdict's
    ``broken`` lists it (a trial's hunt skipped such a commit without a word in the report; only
    `sleuth show` had "ProbeError: benchmark command timed out twice (10 s, then 20 s) in ...:")."""
    fails = "if subject == 'change 2':\n    import time; time.sleep(600)"
    repo, good, culprit = _project(tmp_path, fails, only_culprit_in_lib=False)
    parent = git_in(repo)("rev-parse", f"{culprit}^")
    r = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--good-value", "1.0", "--samples", "3", "--sample-timeout", "3", "--json", "--db", tmp_path / "runs.db",
    )  # fmt: skip
    v = json.loads(r.stdout)
    listed = [b for b in v["broken"] if b["ref"] == parent[:10]]
    assert listed and listed[0]["how"] == "benchmark command timed out (3 s)", v["broken"]
    assert listed[0]["failure"] == "no output", listed
    report = (tmp_path / "runs" / v["run_id"] / "report.md").read_text()
    listed_at = report.split("## States that did not build, serve or run")[1]
    assert f"| `{parent[:10]}` | benchmark command timed out (3 s) | no output |" in listed_at
