"""Kill -9 anywhere (``evals.killnine``): a hunt and its approval SIGKILLed at seeded random
points, each time restarted as a person would; the run still ends with the right culprit, one
confirmation, one proposal, one revert branch, nothing measured twice, nothing left running, and
the user's repository untouched apart from the approved branch."""

from __future__ import annotations

import numpy as np
import pytest

from evals.fingerprint import fingerprint
from evals.killnine import KillPoint, draw, run_with_kills, violations
from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC


@pytest.fixture
def tiny(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(MINIMAL_SPEC)
    return build(load_spec(spec), tmp_path / "scenario")


def _survives(tiny, db, kills: list[KillPoint]) -> list[str]:
    before = fingerprint(tiny.repo)
    out = run_with_kills(tiny.root / "alert.json", db, kills)
    assert len(out.kills) == len(kills), out.kills  # every point was reached and killed
    return violations(out, db, tiny.truth, tiny.repo, tiny.root, before)


@pytest.mark.slow  # 40-90 s; .ci/run's slow step runs it, bench/kill9.py draws many more (48 kills, 0 violations)
def test_a_hunt_killed_twice_and_an_approval_killed_while_landing_still_end_right(tiny, tmp_path):
    # Seeded: 56 events into the hunt (its A/Bs), then 30 more into the resumed hunt (the bisection
    # or the confirmation), then 1 event into the approval: while it lands the revert. An
    # undisturbed run of this scenario writes well over the 90 events the points are drawn from.
    kills = draw(np.random.default_rng(7), hunt_events=90, approve_events=2)
    assert kills == [KillPoint("hunt", 56), KillPoint("hunt", 30), KillPoint("approve", 1)]
    assert _survives(tiny, tmp_path / "r.db", kills) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_many_random_kill_points(tiny, tmp_path, seed):
    kills = draw(np.random.default_rng(1000 + seed), hunt_events=90, approve_events=12, kills=4)
    assert _survives(tiny, tmp_path / "r.db", kills) == []
