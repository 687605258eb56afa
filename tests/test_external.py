"""No false `none`: a drop reproduced beyond noise that nothing in the repository explains (here a
host a third slower than when the good value was taken, with nothing in the code, the readings
or the packages changed) ends `external`, naming what was measured, with exit 1 and nothing to
approve."""

from __future__ import annotations

import json

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC, sleuth_in_process


def test_a_real_drop_outside_the_repository_is_external_not_none(tmp_path, write_spec):
    text = MINIMAL_SPEC.replace('effect = { cost = "allreduce_eager", add_us = 50 }', "lines = 4")
    text = text.replace('[truth]\nculprits = ["slow"]', '[truth]\nkind = "external"')
    alert = "[system]\nslowdown = 1.35\n[alert]\ngood = 94\nbad = 70\ngive_good_ref = true\nrequests = 2"
    text = text.replace("[alert]\ngood = 94\nbad = 70", alert)
    res = build(load_spec(write_spec(text)), tmp_path / "scenario")
    proc = sleuth_in_process("hunt", "--alert", res.root / "alert.json", "--db", tmp_path / "r.db", "--json")
    v = json.loads(proc.stdout)
    assert proc.returncode == 1, v
    why = [(h["category"], h["status"], h["reason"][:300]) for h in v["hypotheses"]]
    assert v["status"] == "concluded" and v["root_cause"]["kind"] == "external", why
    summary = v["root_cause"]["summary"]
    assert "the known-good commit measures like HEAD" in summary and "vs the alert's good 94" in summary
    assert "installed packages" in summary
    assert "no package changed since pip's log" in summary  # the operator's log records nothing
    assert v["regression"]["delta_pct"] < -3, v["regression"]
    assert v["proposed_action"]["kind"] == "investigate"


def _hunt(good: float, now_median: float, cv: float):
    from agent.state import Hunt, Measured, Target

    now = Measured(
        id="m1", label="now", ref="x", launch="", samples=[now_median] * 5, median=now_median,
        ci_low=now_median, ci_high=now_median, cv=cv,
    )  # fmt: skip
    return Hunt(run_id="r", target=Target(repo="/r", good_value=good), measurements=[now], reproduced="m1")


def test_an_alert_number_within_two_sample_sds_of_now_is_noise_not_an_external_cause():
    """When the known-good commit measures like HEAD, the alert's good value is the only evidence
    left, and it is one run: 89 vs 86 at a 4.6 % sample CV is its noise (none); 89 vs 77 is not."""
    from agent.policy import _alert_within_noise

    assert _alert_within_noise(_hunt(89, 85.9, 0.046))
    assert not _alert_within_noise(_hunt(89, 77.2, 0.043))
    assert not _alert_within_noise(_hunt(70, 60.0, 0.03))
