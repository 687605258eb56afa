"""The benchmark client measures a real server over HTTP and reads verify time from its log."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
    assert res.errors == 2
    # The SDK says only "Connection error.": the request says where and why.
    assert "POST http://127.0.0.1:9/v1/completions" in (res.samples[0].error or "")
    assert "Connection refused" in (res.samples[0].error or "")


def test_sleuth_bench_against_nothing_prints_the_url_not_a_table_of_zeros():
    from tests.conftest import sleuth_in_process

    proc = sleuth_in_process("bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "5")
    assert proc.returncode == 1
    assert "all 4 requests failed" in proc.stderr and "http://127.0.0.1:9/v1/completions" in proc.stderr
    assert "Connection refused" in proc.stderr and "tok/s" not in proc.stdout


TOKEN = b'data: {"choices": [{"index": 0, "text": "a"}]}\n\n'
# What a server sends after its first token, and the error each request reports for it.
BROKEN_STREAMS = {
    "error event": (b'data: {"error": {"message": "scheduler died", "code": 500}}\n\n', "APIError: scheduler died"),
    "dropped": (b"", "APIConnectionError"),
    "not JSON": (b"data: <html>bad gateway</html>\n\n", "malformed stream event"),
    "status 500": (None, "InternalServerError: Error code: 500"),
}


@pytest.fixture()
def broken_server(request):
    """A real HTTP server on 127.0.0.1 that breaks its streams the way ``request.param`` says."""
    tail, _ = BROKEN_STREAMS[request.param]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if tail is None:
                body = b'{"error": {"message": "boom", "type": "InternalServerError"}}'
                self.send_response(500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if tail:  # a clean end: the body ends when the connection closes
                self.send_header("Connection", "close")
            else:  # a body promised longer than it is: the server died mid-stream
                self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(TOKEN + tail)
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("broken_server", list(BROKEN_STREAMS), indirect=True)
def test_a_broken_stream_is_a_failed_request_with_the_servers_reason(broken_server, request):
    """A server that dies, errs or answers garbage mid-stream is evidence: each request says why."""
    expected = BROKEN_STREAMS[request.node.callspec.params["broken_server"]][1]
    res = run_bench(BenchConfig(endpoint=broken_server, model="m", requests=2, concurrency=2, timeout_s=10))
    assert res.errors == 2, res.samples
    assert all(expected in (s.error or "") for s in res.samples), [s.error for s in res.samples]


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


def test_a_timeout_that_is_not_positive_is_bad_input_not_a_traceback():
    from tests.conftest import sleuth_in_process

    proc = sleuth_in_process("bench", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m", "--timeout", "-1")
    assert proc.returncode == 2 and "'--timeout'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture()
def dripping_server():
    """A real HTTP server on 127.0.0.1 that sends one token, then an SSE keep-alive comment every
    tenth of a second for as long as the client listens: no read ever times out."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(TOKEN)
                while not stop.wait(0.1):
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
            except OSError:  # the client went away
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    stop.set()
    server.shutdown()
    server.server_close()


def test_a_stream_that_never_ends_fails_its_request_at_its_timeout(dripping_server):
    """The timeout is the whole request's, not one read's: keep-alive comments every 0.1 s held a
    hunt past its wall budget (a trial's dripping server, killed after 668 s of a 40 s budget)."""
    res = run_bench(BenchConfig(endpoint=dripping_server, model="m", requests=2, concurrency=1, timeout_s=1))
    assert res.errors == 2
    assert all(s.error == "timed out: no complete answer within 1 s (the stream stayed open)" for s in res.samples)


def test_an_interrupt_leaves_a_run_whose_stream_never_ends_at_once(dripping_server, tmp_path):
    """SIGTERM (a hunt's KeyboardInterrupt) mid-run leaves at once: the pool's own exit waited for
    every request still open, so the first SIGTERM of a hunt on a dripping server did nothing."""
    import signal
    import subprocess
    import sys
    import time

    started = tmp_path / "started"
    code = (
        "import pathlib, signal\n"
        "from tools.bench import BenchConfig, run_bench\n"
        "def stop(*_): raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"cfg = BenchConfig(endpoint={dripping_server!r}, model='m', requests=1, timeout_s=600)\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "run_bench(cfg)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the request is open, its stream dripping
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)  # the request's own timeout is 600 s
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
