"""A latency alert in the lab end to end: only p99 TTFT moved (a copy in the extend path), decode
tok/s did not; the hunt compares the alerted metric, lower is better, and names the commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import sleuth_in_process

CORE = Path(__file__).parent.parent / "evals" / "suites" / "core"


@pytest.mark.slow  # ~20 s; the core suite's latency scenarios are hunted by bench/real_cost.py and `sleuth eval`,
# a p99 TTFT hunt with lower-is-better by test_metric_cli.py in the default run
def test_a_p99_ttft_alert_is_hunted_on_p99_ttft(tmp_path):
    scen = build(load_spec(CORE / "prefill_ttft.toml"), tmp_path / "s")
    alert = json.loads((scen.root / "alert.json").read_text())["alerts"][0]
    assert alert["labels"]["metric"] == "p99_ttft_ms" and alert["annotations"]["direction"] == "lower_is_better"
    assert "--input-len 128" in alert["annotations"]["benchmark_command"]
    db = tmp_path / "runs.db"
    proc = sleuth_in_process("hunt", "--alert", scen.root / "alert.json", "--db", db, "--json")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    v = json.loads(proc.stdout)
    assert v["target"]["metric"] == "p99_ttft_ms" and v["target"]["higher_is_better"] is False
    assert v["regression"]["delta_pct"] > 10  # the latency rose; the sign is the metric's own
    assert v["root_cause"]["kind"] == "commit" and v["root_cause"]["ref"] == scen.truth["root_causes"][0]["ref"]
    report = (db.parent / "runs" / v["run_id"] / "report.md").read_text()
    assert "median p99_ttft_ms" in report
