"""The recorded worlds hunted live (slow step): the same truth and checks as their recordings
(``tests/test_recorded.py``), on the real repository, servers and benchmark, so the live path
behind each recording keeps working and a recording that has gone stale shows up here first."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import sleuth_in_process
from tests.worlds import WORLDS, matches


@pytest.mark.slow  # 10 s to 90 s each on two busy cores; the default run replays their recordings
@pytest.mark.parametrize("name", sorted(WORLDS))
def test_a_world_hunted_live_names_its_truth(tmp_path, name):
    verdict, truth = WORLDS[name].hunt(tmp_path, tmp_path / "r.db")
    assert matches(truth, verdict.get("root_cause"), verdict), (truth, verdict.get("root_cause"), verdict.get("error"))
    (WORLDS[name].live_check or WORLDS[name].check)(verdict)


@pytest.mark.slow  # a lab hunt (about 60-90 s on two busy cores), then the approval and its re-measure
def test_two_commit_causes_approved_land_one_branch_holding_both_reverts(tmp_path):
    db = tmp_path / "r.db"
    verdict, truth = WORLDS["staircase"].hunt(tmp_path, db)
    assert matches(truth, verdict.get("root_cause"), verdict), verdict.get("root_cause")
    action = verdict["proposed_action"]
    proc = sleuth_in_process("approve", verdict["run_id"], "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    repo = verdict["target"]["repo"]
    subjects = subprocess.run(
        ["git", "-C", repo, "log", "--format=%s", f"HEAD..{action['branch']}"], capture_output=True, text=True
    ).stdout.splitlines()
    assert len(subjects) == 2 and all(s.startswith('Revert "') for s in subjects), subjects
    after = json.loads(proc.stdout).get("after") or {}
    assert after.get("measurement"), after  # the branch with both reverts re-measured
