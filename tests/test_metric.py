"""The sample is the number someone alerted on: a key of the JSON a real benchmark writes, a regex
for plain text, and only when nothing is named the last number printed (with a warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench import SERVER_METRICS, BenchConfig, BenchResult, Percentiles, RequestSample
from tools.metric import LAST_NUMBER_WARNING, MetricError, MetricSpec, higher_is_better, last_json

OUTPUTS = Path(__file__).parent / "fixtures" / "bench_outputs"


def text(name: str) -> str:
    return (OUTPUTS / name).read_text()


def test_sglang_bench_serving_output_file_gives_the_newest_runs_keys():
    """sglang appends one JSON line per run to --output-file: the newest line is this sample."""
    jsonl = text("sglang_bench_serving.jsonl")
    assert MetricSpec(name="p99_ttft_ms").read("", jsonl) == 188.4
    assert MetricSpec(name="output_throughput").read("", jsonl) == 2374.72
    assert MetricSpec(name="median_itl_ms").read("", jsonl) == pytest.approx(12.74)


def test_vllm_bench_serve_result_file_and_a_jmespath_into_its_lists():
    doc = text("vllm_bench_serve.json")
    assert MetricSpec(name="p99_tpot_ms").read("", doc) == 72.63
    assert MetricSpec(name="total_token_throughput").read("", doc) == 868.8
    assert MetricSpec(name="ttfts[3]").read("", doc) == 10.9


def test_aiperf_and_guidellm_output_files_from_real_runs_are_read_by_a_path_and_their_direction_known():
    """Written by the clients themselves (aiperf 0.13.0, guidellm 0.8.1), each run against a real
    OpenAI-compatible server here (README in the fixtures' folder): the sample is a path into them."""
    aiperf = text("aiperf_profile_export_aiperf.json")
    assert MetricSpec(name="time_to_first_token.p50").read("", aiperf) == pytest.approx(12.684869)
    assert MetricSpec(name="output_token_throughput.avg").read("", aiperf) > 0
    guidellm = text("guidellm_benchmarks.json")
    ttft = "benchmarks[0].metrics.time_to_first_token_ms.successful.median"
    assert MetricSpec(name=ttft).read("", guidellm) == pytest.approx(10.906458)
    rate = "benchmarks[0].metrics.output_tokens_per_second.successful.median"
    assert MetricSpec(name=rate).read("", guidellm) == pytest.approx(870.85289)
    assert [higher_is_better(n) for n in ("time_to_first_token.p50", ttft, rate, "inter_token_latency.avg")] == [
        False, False, True, False,
    ]  # fmt: skip
    assert higher_is_better("output_token_throughput.p99") is True


def test_the_table_on_stdout_is_read_by_regex_and_its_last_number_is_not_the_metric():
    table = text("sglang_bench_serving_stdout.txt")
    assert MetricSpec(regex=r"P99 TTFT \(ms\):\s+([\d.]+)").read(table) == 188.4
    assert MetricSpec(regex=r"Output token throughput \(tok/s\):\s+([\d.]+)").read(table) == 2374.72
    # The old rule: the last number of the table is P99 ITL, nobody's alert.
    assert MetricSpec().read(table) == 22.34
    assert "--metric" in LAST_NUMBER_WARNING


def test_a_named_key_without_a_file_is_read_from_the_last_json_object_on_stdout():
    stdout = "warming up\nround 1: 812 tok/s\n" + json.dumps({"p99_ttft_ms": 41.5, "output_throughput": 812.0}) + "\n"
    assert MetricSpec(name="p99_ttft_ms").read(stdout) == 41.5
    assert last_json("no json here") is None


@pytest.mark.parametrize(
    ("spec", "output", "message"),
    [
        (MetricSpec(name="p99_ttft_ms"), '{"mean_ttft_ms": 3.0, "completed": 10}', "no 'p99_ttft_ms'"),
        (MetricSpec(name="backend"), '{"backend": "sglang"}', "not a number"),
        (MetricSpec(name="p99_ttft_ms"), "Serving Benchmark Result\n", "no JSON object"),
        (MetricSpec(regex=r"P95 TTFT \(ms\):\s+([\d.]+)"), "P99 TTFT (ms): 3", "matches nothing"),
        (MetricSpec(), "done.", "no number"),
    ],
)
def test_an_output_without_the_metric_is_a_clear_error(spec, output, message):
    with pytest.raises(MetricError, match=message):
        spec.read(output)


def test_a_missing_key_error_names_the_numbers_there_are():
    with pytest.raises(MetricError, match="mean_ttft_ms"):
        MetricSpec(name="p99_ttft_ms").read('{"mean_ttft_ms": 3.0}')


def test_a_bad_name_or_regex_is_refused_up_front():
    with pytest.raises(ValueError, match="not a JSON key or path"):
        MetricSpec(name="p99[")
    with pytest.raises(ValueError, match="is not a regex"):
        MetricSpec(regex="(unclosed")
    with pytest.raises(ValueError, match="not both"):
        MetricSpec(name="a", regex="b")


@pytest.mark.parametrize(
    ("name", "higher"),
    [
        ("tok_per_s", True),
        ("output_throughput", True),
        ("total_token_throughput", True),
        ("request_throughput", True),
        ("accept_length", True),
        ("p99_ttft_ms", False),
        ("median_itl_ms", False),
        ("p99_tpot_ms", False),
        ("p99_e2e_latency_ms", False),
        ("mean_e2el_ms", False),
        ("latency_s", False),
        ("results[0].p99_ttft_ms", False),
        ("completed", None),
    ],
)
def test_the_direction_is_known_for_the_common_names(name, higher):
    assert higher_is_better(name) is higher


def _result(ttfts: list[float], itl: float, tokens: int = 9) -> BenchResult:
    samples = [
        RequestSample(
            index=i,
            ok=True,
            completion_tokens=tokens,
            ttft_s=t,
            latency_s=t + itl * (tokens - 1),
            decode_s=itl * (tokens - 1),
            itl_s=[itl] * (tokens - 1),
            decode_tok_per_s=1 / itl,
        )
        for i, t in enumerate(ttfts)
    ]
    zero = Percentiles.of([])
    return BenchResult(
        config=BenchConfig(endpoint="http://127.0.0.1:1/v1", model="m"),
        samples=samples,
        errors=0,
        duration_s=2.0,
        tok_per_s=1 / itl,
        output_tok_per_s=len(ttfts) * tokens / 2.0,
        completion_tokens=len(ttfts) * tokens,
        ttft_s=Percentiles.of(ttfts),
        itl_s=Percentiles.of([itl]),
        latency_s=zero,
    )


def test_sleuth_bench_names_its_metrics_as_bench_serving_does():
    m = _result([0.010, 0.020, 0.030, 0.100], itl=0.005).metrics()
    assert m["median_ttft_ms"] == pytest.approx(25.0)
    assert m["p99_ttft_ms"] == pytest.approx(97.9, abs=0.1)
    assert m["mean_itl_ms"] == pytest.approx(5.0) and m["p99_tpot_ms"] == pytest.approx(5.0)
    assert m["request_throughput"] == pytest.approx(2.0) and m["output_throughput"] == pytest.approx(18.0)
    assert m["tok_per_s"] == pytest.approx(200.0)
    assert set(m) <= SERVER_METRICS
    with pytest.raises(KeyError, match="known: "):
        _result([0.01], 0.005).metric("p42_ttft_ms")
