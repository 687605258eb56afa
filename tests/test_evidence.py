"""A verdict's evidence strength and the drop's shape (``agent.evidence``), read off a hunt."""

from __future__ import annotations

from agent.evidence import sentence, steps, strength
from agent.state import Hunt, Hypothesis, Measured, Target

SHAS = [f"{i:040x}" for i in range(8)]  # SHAS[0] the known-good commit, SHAS[7] HEAD


def _m(ref: str, level: float, n: int = 5) -> Measured:
    return Measured(
        id=f"m-{ref[-2:]}", label=f"bisect {ref[:8]}", ref=ref, launch="x", samples=[level] * n,
        median=level, ci_low=level, ci_high=level, cv=0.0,
    )  # fmt: skip


def _hunt(levels: dict[int, float], culprits: list[int], **kw) -> Hunt:
    h = Hunt(run_id="r", target=Target(repo="/r"), **kw)
    h.good_candidate, h.bisected = SHAS[0], SHAS[1:]
    h.measurements = [_m(SHAS[i], v) for i, v in levels.items()]
    h.culprits = [SHAS[i] for i in culprits]
    return h


def test_one_commit_carrying_the_drop_is_one_step():
    s = steps(_hunt({0: 100, 3: 99, 4: 80, 7: 80}, [4]))
    assert s["shape"] == "one step" and s["steps"] == [{"ref": SHAS[4], "delta_pct": -19.0, "share_pct": 95.0}]


def test_two_commits_sharing_the_drop_are_steps_and_many_small_ones_are_gradual():
    two = steps(_hunt({0: 100, 2: 100, 3: 90, 5: 90, 6: 80, 7: 80}, [3, 6]))
    assert two["shape"] == "steps" and [x["share_pct"] for x in two["steps"]] == [50.0, 50.0]
    many = steps(_hunt({0: 100, 1: 94, 2: 88, 3: 82, 7: 82}, [1, 2, 3]))
    assert many["shape"] == "gradual" and len(many["steps"]) == 3


def test_a_single_culprit_with_intermediate_levels_says_the_drop_was_not_one_step():
    h = _hunt({0: 100, 2: 88, 5: 80, 7: 80}, [5])  # commit 2 sits 60 % of the way down: an earlier step
    s = steps(h)
    assert s["intermediate"] == [SHAS[2]] and s["shape"] == "gradual"
    assert s["steps"][0]["share_pct"] == 40.0  # the named commit carries 40 % of the drop, not all of it
    assert "Shape of the drop: **gradual**" in sentence(h) and "1 probed commits at intermediate levels" in sentence(h)


def test_a_confirmed_cause_is_proven_with_its_p_value_corrected_for_the_tests_made():
    h = _hunt({0: 100, 4: 80, 7: 80}, [4], root_kind="commit", root_ref=SHAS[4])
    h.hypotheses = [
        Hypothesis(id="h1", category="environment", statement="", test="", status="refuted", evidence=["m1", "m2"]),
        Hypothesis(id="h2", category="history", statement="", test="", status="supported", evidence=["m3", "m4"]),
    ]
    h.confirmation = {"ok": True, "p_value": 0.002}
    s = strength(h)
    assert s == {"evidence": "proven", "p_value": 0.002, "p_corrected": 0.006, "tests": 3}
    h.confirmation = {}  # named by the bisection, never confirmed (the budget ran out)
    assert strength(h)["evidence"] == "likely"
    h.root_kind, h.root_ref = "hardware", "clocks.sm"
    assert strength(h)["evidence"] == "observed"
    h.root_kind = "external"
    assert strength(h) is None  # nothing named: nothing to be strong about
