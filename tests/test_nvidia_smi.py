"""The fake nvidia-smi reports the scenario's hardware the way the real one formats it."""

from __future__ import annotations

import json
import subprocess

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC


def smi(host, *args: str) -> str:
    return subprocess.run([str(host / "bin" / "nvidia-smi"), *args], capture_output=True, text=True, check=True).stdout


def test_query_gpu_csv_with_and_without_units(seed_scenario):
    rows = smi(
        seed_scenario.host,
        "--query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,pcie.link.gen.current,pcie.link.width.current",
        "--format=csv,noheader,nounits",
    ).splitlines()
    assert len(rows) == 8
    assert rows[0] == "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 2310, 2430, 231.00, 5, 16"
    with_units = smi(seed_scenario.host, "--query-gpu=clocks.sm,power.draw", "--format=csv").splitlines()
    assert with_units[0] == "clocks.sm [MHz], power.draw [W]"
    assert with_units[1] == "2310 MHz, 231.00 W"


def test_default_table_and_gpu_list(seed_scenario):
    table = smi(seed_scenario.host)
    assert "Driver Version: 580.95.05" in table and "SM 2310 / 2430 MHz" in table
    assert len(smi(seed_scenario.host, "-L").splitlines()) == 8


def test_an_unknown_field_fails_like_the_real_tool(seed_scenario):
    proc = subprocess.run(
        [str(seed_scenario.host / "bin" / "nvidia-smi"), "--query-gpu=bogus", "--format=csv"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and 'Field "bogus" is not a valid field' in proc.stderr


def test_a_throttled_scenario_reports_its_clocks(tmp_path, write_spec):
    text = (
        MINIMAL_SPEC + '\n[hardware]\nid = "hw"\nsm_clock_mhz = 1200\npcie_gen = 4\nthrottle_reasons = "HW Slowdown"\n'
    )
    res = build(load_spec(write_spec(text)), tmp_path / "hw")
    row = smi(
        res.host,
        "--query-gpu=clocks.sm,pcie.link.gen.current,pcie.link.gen.max,clocks_throttle_reasons.active",
        "--format=csv,noheader",
    ).splitlines()[0]
    assert row == "1200 MHz, 4, 5, HW Slowdown"


def test_another_process_on_the_gpus_is_listed_per_gpu_and_slows_compute(tmp_path, write_spec):
    from tools.catalog import GpuQuery, ToolContext, nvidia_smi

    text = MINIMAL_SPEC.replace('culprits = ["slow"]', 'culprits = ["stray"]') + (
        '\n[hardware]\nid = "stray"\ncount = 2\n'
        'other_processes = [{ pid = 4242, name = "python3 train.py", used_mib = 30000, sm_share = 0.25 }]\n'
    )
    res = build(load_spec(write_spec(text)), tmp_path / "shared")
    rows = smi(res.host, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits")
    assert rows.splitlines() == ["4242, python3 train.py, 30000"] * 2  # one row per process and GPU
    assert res.truth["kind"] == "hardware" and res.truth["root_causes"][0]["ref"] == "gpu.processes"
    profile = json.loads(next(res.root.rglob("minitorch/_profile.json")).read_text())
    assert profile["foreign_sm_share"] == 0.25
    # the hunt's tool reads it, once per process
    ctx = ToolContext(res.repo)
    got = nvidia_smi(ctx, GpuQuery(setup=f"export PATH={res.host / 'bin'}:$PATH && "))
    assert got.processes == [{"pid": "4242", "process_name": "python3 train.py", "used_memory": "30000"}]
