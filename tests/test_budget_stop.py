"""A budget that stops a hunt is the run's one line, and nothing a confirmation dropped is left in
it: a toolz trial's hunt named a YAML-only commit, its confirmation dropped it, the next search ran
out of probes, and the report, `sleuth runs` and the summary still named the dropped commit while
only ``error`` said which budget stopped it."""

from __future__ import annotations

from agent import policy
from agent.graph import Hunter
from agent.report import markdown, verdict
from agent.runtime import BudgetExhausted
from agent.state import Hunt, Target

STOPPED = "probe budget of 20 exhausted; the bisection had narrowed 27 commits to 1 (6e2391c31e)"


def _stop_in_a_node(tmp_path, hunt: Hunt) -> Hunt:
    """Run one graph node that spends the last of the budget, as the hunt's own nodes do."""
    hunter = Hunter(tmp_path / "r.db", tmp_path / "runs")
    try:
        hunter.store.start_run(hunt.run_id)

        def spend(_hunt: Hunt, _rt) -> None:
            raise BudgetExhausted(STOPPED)

        out = hunter._node(spend, "localize")({"hunt": hunt.model_dump(mode="json")})
    finally:
        hunter.close()
    return Hunt.model_validate(out["hunt"])


def _named(tmp_path) -> Hunt:
    hunt = Hunt(run_id="r1", target=Target(repo=str(tmp_path)))
    hunt.root_kind, hunt.root_ref = "commit", "775434a252" + "0" * 30
    hunt.culprits = [hunt.root_ref]
    hunt.root_summary = '775434a252 "Oops update to pypa/gh-action-pypi-publish@v1.8.1"'
    hunt.confirmation = {"text": "culprit^ 2.603 vs culprit 2.349 value (-9.8%, p=0.16, unknown)"}
    return hunt


def test_a_culprit_its_confirmation_dropped_is_not_the_line_of_a_run_a_budget_then_stopped(tmp_path):
    hunt = _named(tmp_path)
    hunter = Hunter(tmp_path / "r0.db", tmp_path / "runs0")
    try:
        policy.confirm_failed(hunt, hunter.runtime(hunt))  # bisect again, verified
    finally:
        hunter.close()
    assert (hunt.root_kind, hunt.culprits, hunt.root_summary) == (None, [], "")
    stopped = _stop_in_a_node(tmp_path, hunt)
    v = verdict(stopped)
    assert v["status"] == "inconclusive" and v["root_cause"] is None
    assert v["summary"] == f"stopped: {STOPPED}" and v["error"] == STOPPED
    report = markdown(stopped)
    assert f"stopped: {STOPPED}" in report and "775434a252" not in report.split("## Numbers")[0]


def test_a_budget_that_stops_a_hunt_after_it_named_a_cause_is_said_after_it(tmp_path):
    hunt = _named(tmp_path)
    stopped = _stop_in_a_node(tmp_path, hunt)
    assert stopped.root_summary == f'775434a252 "Oops update to pypa/gh-action-pypi-publish@v1.8.1"; stopped: {STOPPED}'
    again = _stop_in_a_node(tmp_path, stopped.model_copy(update={"status": "running", "run_id": "r2"}))
    assert again.root_summary.count(STOPPED) == 1  # said once
