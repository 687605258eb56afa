"""A hypothesis' status from its A/B (``agent.experiments.verdict_of``): an A/B that stays unknown
is not a refutation."""

from __future__ import annotations

import statistics

import pytest
from pydantic import ValidationError

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


def test_without_alert_values_the_smallest_effect_is_a_quarter_of_the_measured_history_drop():
    """A --bench hunt given only a known-good ref: once its history A/B has measured the drop
    (here 0.004 s -> 0.2 s, 50x), a further step 6 % slower, significant, cannot explain it (5 % of
    the drop); a revert that recovers it, measured from HEAD's side, can. Before that A/B the
    floor is 5 %."""
    from agent.experiments import explains, min_effect_pct
    from agent.state import Hypothesis

    h = Hunt(run_id="r", policy="methodical", target=Target(repo="/r", higher_is_better=False), budget=Budget())
    parent = _m("p", [0.16, 0.161, 0.159, 0.162, 0.158, 0.16])
    step = _m("c", [0.17, 0.171, 0.169, 0.172, 0.168, 0.17])
    cmp = compare(parent.samples, step.samples)
    assert cmp.verdict == "different" and min_effect_pct(h) == 5.0
    assert explains(h, cmp, parent, step)  # unknown drop: 6 % is enough
    good, head = _m("good-candidate", [0.004, 0.0041, 0.0039, 0.004]), _m("HEAD", [0.2, 0.21, 0.19, 0.2])
    h.measurements = [good, head, parent, step]
    h.hypotheses = [
        Hypothesis(id="h1", category="history", statement="a commit", test="A/B", status="supported",
                   evidence=[good.id, head.id]),
    ]  # fmt: skip
    # A quarter of the drop, in percent of its larger end (it must hold from either side of an A/B).
    assert min_effect_pct(h) == pytest.approx(0.25 * (0.2 - 0.004) / 0.2 * 100)
    assert not explains(h, cmp, parent, step)
    fixed = _m("HEAD+revert", [0.0041, 0.004, 0.0042, 0.004, 0.0041, 0.0039])  # measured from HEAD's side
    assert explains(h, compare(head.samples, fixed.samples), fixed, head)
    h.target = Target(repo="/r", higher_is_better=False, good_value=0.1, bad_value=0.2)  # the alert's own
    assert min_effect_pct(h) == 12.5


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


def test_the_verdict_is_checked_against_its_documented_contract():
    # agent.verdict describes every field (the docs' reference page is generated from it): a field
    # the model does not describe, or a value outside its kind, is refused before anything is stored.
    from agent.verdict import Verdict

    v = verdict(_hunt())
    assert Verdict.model_validate(v).run_id == "r"
    with pytest.raises(ValidationError, match="undocumented"):
        Verdict.model_validate(v | {"undocumented": 1})
    with pytest.raises(ValidationError, match=r"root_cause\.kind"):
        Verdict.model_validate(v | {"root_cause": {"kind": "vibes", "ref": "", "summary": ""}})
    described = Verdict.model_json_schema()["properties"]
    assert all(p.get("description") for p in described.values()), [
        k for k, p in described.items() if not p.get("description")
    ]
