"""The statistics decide 'same', 'different' or 'undecided'; the log parser reads SGLang-style logs."""

from __future__ import annotations

import numpy as np

from tools.serverlog import parse_log
from tools.stats import compare, high_threshold, min_p_value, summarize


def test_clearly_separated_samples_are_different_with_the_right_sign():
    rng = np.random.default_rng(1)
    good, bad = rng.normal(94, 2, 8), rng.normal(60, 2, 8)
    c = compare(good, bad)
    assert c.verdict == "different" and c.p_value < 0.01
    assert -40 < c.delta_pct < -30 and c.delta_ci_low < c.delta_pct < c.delta_ci_high


def test_same_needs_a_smallest_effect_that_matters():
    rng = np.random.default_rng(2)
    a, b = rng.normal(90, 1, 12), rng.normal(90, 1, 12)
    assert compare(a, b).verdict == "unknown"  # no effect named: nothing can be ruled out
    assert compare(a, b, min_effect_pct=5).verdict == "same"  # 5 % is 4.5 sd: it would have shown


def test_the_same_threshold_rises_with_noise_and_falls_with_samples():
    assert high_threshold(8, 8, 4.0) < high_threshold(8, 8, 1.0)
    assert high_threshold(40, 40, 1.0) < high_threshold(8, 8, 1.0)


def test_too_few_samples_stay_unknown_rather_than_guessed():
    assert min_p_value(2, 2) > 0.01
    assert compare([94.0, 95.0], [60.0, 61.0], min_effect_pct=5).verdict == "unknown"


def test_kolmogorov_smirnov_catches_a_change_of_spread():
    rng = np.random.default_rng(3)
    a = rng.normal(100, 1, 60)
    b = np.concatenate([rng.normal(92, 1, 30), rng.normal(108, 1, 30)])  # same median, bimodal
    c = compare(a, b)
    assert c.p_ks < 0.01 < c.p_mwu and c.verdict == "different"


def test_summary_interval_brackets_the_median():
    s = summarize([10, 11, 12, 13, 14, 15, 100])
    assert s.median == 13 and s.ci_low <= 13 <= s.ci_high and s.n == 7 and s.iqr == 3.0


LOG = """\
[2026-01-13 09:00:00] server_args=ServerArgs(model_path='Kimi-K2.5', tp_size=8, attention_backend='triton', \
speculative_algorithm='EAGLE3', speculative_num_steps=2, disable_cuda_graph=False)
[2026-01-13 09:00:01] The server is fired up and ready to roll! (http://127.0.0.1:30000)
[2026-01-13 09:00:05] Decode batch. #running-req: 1, #token: 80, accept len: 1.96, verify time: 19.10 ms, \
gen throughput (token/s): 93.10, #queue-req: 0
[2026-01-13 09:00:06] Decode batch. #running-req: 1, #token: 80, accept len: 2.01, verify time: 19.30 ms, \
gen throughput (token/s): 94.90, #queue-req: 0
"""


def test_the_log_parser_reads_args_throughput_and_verify_time():
    log = parse_log(LOG)
    assert log.ready
    assert log.server_args["attention_backend"] == "triton"
    assert log.server_args["speculative_num_steps"] == "2"
    assert log.throughput == [93.10, 94.90]
    assert log.verify_ms == [19.10, 19.30]
    assert log.accept_len == [1.96, 2.01]
