"""A hypothesis' status from its A/B (``agent.experiments.verdict_of``): an A/B that stays unknown
is not a refutation."""

from __future__ import annotations

import statistics

from agent.experiments import verdict_of
from agent.report import verdict
from agent.state import Budget, Hunt, Measured, Target
from tools.stats import compare


def _hunt() -> Hunt:  # a 20 % throughput drop: a gain under 5 % cannot explain it
    target = Target(repo="/r", good_value=100, bad_value=80)
    return Hunt(run_id="r", policy="methodical", target=target, budget=Budget())


def _m(mid: str, samples: list[float]) -> Measured:
    med = statistics.median(samples)
    return Measured(
        id=mid, label=mid, ref="HEAD", launch="", samples=samples, median=med, ci_low=min(samples),
        ci_high=max(samples), cv=statistics.pstdev(samples) / med,
    )  # fmt: skip


def test_a_clear_gain_supports_a_flat_one_refutes_and_an_undecided_one_stays_inconclusive():
    h = _hunt()
    slow = _m("now", [80.0, 81, 79, 80, 82, 78])
    fixed = _m("old", [100.0, 99, 101, 100, 98, 102])
    assert verdict_of(h, compare(slow.samples, fixed.samples), fixed, slow) == "supported"
    same = _m("same", [80.5, 79.5, 80, 81, 79, 80])
    assert verdict_of(h, compare(slow.samples, same.samples, min_effect_pct=5), same, slow) == "refuted"
    # Heavy noise, a gain in the right direction that could still be the whole drop: unknown.
    noisy_now = _m("now", [60.0, 95, 70, 88, 75, 99])
    noisy_old = _m("old", [70.0, 105, 80, 96, 85, 110])
    cmp = compare(noisy_now.samples, noisy_old.samples)
    assert cmp.verdict == "unknown"
    assert verdict_of(h, cmp, noisy_old, noisy_now) == "inconclusive"
    # ...unless its one-sided test already rules out a gain large enough to matter,
    cmp.p_shortfall = 0.001
    assert verdict_of(h, cmp, noisy_old, noisy_now) == "refuted"
    # ...or its estimate is under the smallest effect that matters (5 %, a quarter of the 20 % drop:
    # "good 67 vs HEAD 63.9, -4.6 %, p = 0.19" cannot be the cause of a 30 % drop).
    near = _m("old", [62.0, 97, 72, 90, 77, 101])
    cmp = compare(noisy_now.samples, near.samples)
    assert cmp.verdict == "unknown" and 0 < cmp.delta_pct < 5, cmp
    assert verdict_of(h, cmp, near, noisy_now) == "refuted"


def test_a_hunt_whose_history_ab_stayed_unknown_ends_inconclusive_saying_so_not_none():
    from agent.policy import localize
    from agent.state import Hypothesis

    h = _hunt()
    h.regression = {"metric": "tok_per_s", "good": 100, "bad": 80, "delta_pct": -20.0, "noise_cv_pct": 15.0}
    why = "good-candidate 95.1 vs HEAD 81.3 tok_per_s (-14.5%, p=0.04, unknown)"
    h.hypotheses = [
        Hypothesis(id="h1", category="history", statement="a commit slows it", test="A/B", status="inconclusive",
                   reason=why, evidence=["m2", "m3"]),
    ]  # fmt: skip
    localize(h, None)  # type: ignore[arg-type]  # this branch measures nothing
    assert h.status == "inconclusive" and h.root_kind is None
    assert f"undecided, the A/B stayed unknown: h1 [history] {why}" in h.root_summary
    # The verdict JSON says it too, with no root cause to carry it.
    v = verdict(h)
    assert v["root_cause"] is None and v["summary"] == h.root_summary


def test_a_hunt_stopped_by_an_error_has_that_error_as_its_summary():
    h = _hunt()
    h.status, h.error = "inconclusive", "the wall-time budget ran out mid-probe"
    assert verdict(h)["summary"] == "the wall-time budget ran out mid-probe"
