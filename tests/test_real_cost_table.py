"""``bench/real_cost.py --markdown``: the measured rows as the table the README publishes, so the
table is regenerated from ``bench/real_cost.json``, never typed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "real_cost.py"


def _real_cost():
    spec = importlib.util.spec_from_file_location("real_cost", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_table_has_a_row_per_scenario_pinpoints_cost_beside_and_the_means_under_it():
    rc = _real_cost()
    rows = [
        {"scenario": "eagle3_pcg_moe", "exact": True, "cost": {"launches": 7, "samples": 43},
         "pinpoint": [0.975, 49.75]},
        {"scenario": "uneven_steps", "exact": True, "cost": {"launches": 16, "samples": 80}, "pinpoint": None},
        {"scenario": "noise_only", "exact": False, "cost": {"launches": 1, "samples": 20}, "pinpoint": None},
    ]  # fmt: skip
    lines = rc.markdown(rows).splitlines()
    assert lines[2] == "| `eagle3_pcg_moe` (seed) | yes | 7 | 43 | 56 min | 98% / 50 / 274 min |"
    assert lines[3] == "| `uneven_steps` | yes | 16 | 80 | 120 min | - |"
    assert lines[4] == "| `noise_only` | no | 1 | 20 | 15 min | - |"
    # (56.5 + 120 + 15) / 3 = 63.8; the core suite without the seed: (120 + 15) / 2 = 67.5
    assert lines[-1] == (
        "Exact 2 of 3; mean 8.0 launches and 63.8 real-equivalent minutes (the core suite 67.5, the largest 120)."
    )
    # Two side by side (the README's): the odd one out beside empty cells, every row as wide.
    two = rc.markdown(rows, per_row=2).splitlines()
    assert two[2] == lines[2][:-1] + lines[3]
    assert two[3] == lines[4][:-1] + "| " * 6 + "|"
    assert len({row.count("|") for row in two[:4]}) == 1
