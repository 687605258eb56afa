"""The statistics decide 'same', 'different' or 'undecided'; the log parser reads SGLang-style logs."""

from __future__ import annotations

import numpy as np

from tools.serverlog import parse_log
from tools.stats import compare, min_p_value, summarize


def test_clearly_separated_samples_are_different_with_the_right_sign():
    rng = np.random.default_rng(1)
    good, bad = rng.normal(94, 2, 8), rng.normal(60, 2, 8)
    c = compare(good, bad)
    assert c.verdict == "different" and c.p_value < 0.01
    assert -40 < c.delta_pct < -30 and c.delta_ci_low < c.delta_pct < c.delta_ci_high


def test_samples_from_one_distribution_are_the_same():
    rng = np.random.default_rng(2)
    c = compare(rng.normal(90, 3, 12), rng.normal(90, 3, 12))
    assert c.verdict == "same"


def test_too_few_samples_are_undecided_rather_than_guessed():
    assert min_p_value(2, 2) > 0.01
    assert compare([94.0, 95.0], [60.0, 61.0]).verdict == "undecided"


def test_summary_interval_brackets_the_median():
    s = summarize([10, 11, 12, 13, 14, 15, 100])
    assert s.median == 13 and s.ci_low <= 13 <= s.ci_high and s.n == 7


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
