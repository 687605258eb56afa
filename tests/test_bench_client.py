"""The benchmark client measures a real server over HTTP and reads verify time from its log."""

from __future__ import annotations

import json
import subprocess

import pytest

from evals.lab.measure import export_worktree, scenario_bench_config
from tests.conftest import sleuth_exe
from tools.bench import BenchConfig, run_bench
from tools.server import launch


@pytest.fixture(scope="module")
def bad_server(seed_scenario, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    ann, _ = scenario_bench_config(seed_scenario.root)
    tree = export_worktree(seed_scenario.repo, tmp / "tree")
    cmd = ann["launch_command"].replace("--speculative-algorithm", "--decode-log-interval 5 --speculative-algorithm")
    with launch(cmd, tree, tmp / "server.log") as srv:
        yield srv


def test_a_run_reports_throughput_latencies_and_raw_samples(bad_server):
    cfg = BenchConfig(
        endpoint=f"{bad_server.base_url}/v1",
        model="Kimi-K2.5",
        requests=3,
        concurrency=1,
        max_tokens=24,
        time_scale=0.2,
        server_log=bad_server.log_path,
    )
    seen = []
    res = run_bench(cfg, on_done=seen.append)
    assert res.errors == 0 and len(res.samples) == 3 and len(seen) == 3
    assert res.completion_tokens == 72
    assert all(s.completion_tokens == 24 and s.ttft_s > 0 and s.decode_s > 0 for s in res.samples)
    assert res.ttft_s.p50 <= res.ttft_s.p90 <= res.ttft_s.p99
    assert res.latency_s.p50 > res.ttft_s.p50
    assert 0 < res.output_tok_per_s < res.tok_per_s  # prefill counts against the former only
    assert res.verify_ms is not None and res.verify_ms > 20  # the bad state's verify pass
    assert res.accept_len is not None and 1.0 <= res.accept_len <= 3.0


def test_chat_api_and_concurrency(bad_server):
    cfg = BenchConfig(
        endpoint=f"{bad_server.base_url}/v1",
        model="Kimi-K2.5",
        requests=4,
        concurrency=2,
        max_tokens=16,
        api="chat",
        time_scale=0.2,
    )
    res = run_bench(cfg)
    assert res.errors == 0 and res.completion_tokens == 64


def test_an_unreachable_endpoint_is_reported_per_request_not_raised():
    res = run_bench(BenchConfig(endpoint="http://127.0.0.1:9/v1", model="m", requests=2, timeout_s=5))
    assert res.errors == 2 and "Connection" in (res.samples[0].error or "")


def test_sleuth_bench_cli_prints_json(bad_server):
    proc = subprocess.run(
        [
            sleuth_exe(),
            "bench",
            "--endpoint",
            f"{bad_server.base_url}/v1",
            "--model",
            "Kimi-K2.5",
            "--requests",
            "2",
            "--max-tokens",
            "8",
            "--time-scale",
            "0.2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["completion_tokens"] == 16 and out["errors"] == 0 and out["tok_per_s"] > 0


def test_sleuth_bench_cli_rejects_bad_input_with_exit_2():
    proc = subprocess.run(
        [sleuth_exe(), "bench", "--endpoint", "localhost:1", "--model", "m"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --endpoint: 'localhost:1' is not an http(s) URL"
