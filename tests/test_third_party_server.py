"""`sleuth bench` against an OpenAI-compatible server that is not ours: fakellm (MIT, from PyPI, in
the `test` extra) streams chat completions one word per SSE chunk with 10 ms between chunks, and
sends no usage. TTFT, ITL and the decode rate come out of its real HTTP stream."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import sleuth_in_process

WORDS = 24


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fakellm(tmp_path: Path):
    exe = Path(sys.executable).parent / "fakellm"
    assert exe.exists(), "fakellm is part of the test extra: pip install -e '.[test]'"
    answer = " ".join(f"w{i}" for i in range(WORDS))
    cfg = tmp_path / "fakellm.yaml"
    cfg.write_text(f'version: 1\nrules:\n  - name: answer\n    respond:\n      content: "{answer}"\n')
    port = free_port()
    proc = subprocess.Popen(
        [str(exe), "serve", "--port", str(port), "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/_fakellm/stats", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            pytest.fail(f"fakellm did not come up: {proc.stdout.read() if proc.poll() is not None else ''}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_sleuth_bench_measures_a_third_party_openai_compatible_server(fakellm):
    proc = sleuth_in_process(
        "bench", "--endpoint", f"{fakellm}/v1", "--model", "any-model", "--api", "chat",
        "--requests", "4", "--concurrency", "2", "--metric", "median_itl_ms", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(proc.stdout)
    assert res["errors"] == 0
    # No usage in its stream: the tokens are the content chunks, one word each.
    assert [s["completion_tokens"] for s in res["samples"]] == [WORDS] * 4
    m = res["metrics"]
    assert 5 <= m["median_itl_ms"] <= 200  # its 10 ms between chunks (loaded machines stretch it)
    assert m["median_tpot_ms"] >= 5 and m["p99_ttft_ms"] > 0
    assert m["tok_per_s"] <= 1000 / 5  # cannot beat one chunk per ~10 ms by much
    assert m["request_throughput"] > 0 and m["output_throughput"] > 0


def test_a_chat_only_server_asked_for_completions_says_which_path_and_which_flag(fakellm):
    """fakellm has no /v1/completions: the one line names the URL asked and ``--api chat``, and no
    table of zeros is printed as if something had been measured."""
    proc = sleuth_in_process("bench", "--endpoint", f"{fakellm}/v1", "--model", "m", "--requests", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"POST {fakellm}/v1/completions" in proc.stderr and "--api chat" in proc.stderr
    assert "NotFoundError" in proc.stderr and "tok/s" not in proc.stdout
