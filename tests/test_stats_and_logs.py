"""The statistics decide 'same', 'different' or 'undecided'; the log parser reads SGLang-style logs."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_a_gain_too_small_to_explain_the_drop_is_ruled_out_before_the_two_sided_test_decides():
    """'blanked env 54 vs now 57, p=0.3': a +9 % gain of the blanked side is implausible, and
    the hypothesis that needs it is refuted without another round of launches."""
    from tools.stats import shortfall_p

    rng = np.random.default_rng(4)
    now = list(rng.normal(57.5, 2.5, 5))
    blanked = list(rng.normal(54.2, 2.5, 5))
    assert shortfall_p(blanked, [5], now, [5], 9.0) <= 0.01
    # A real gain of that size is never ruled out.
    fixed = list(rng.normal(57.5 * 1.35, 2.5, 5))
    assert shortfall_p(fixed, [5], now, [5], 9.0) > 0.5
    # Lower is better (a latency): the better side is the lower one.
    assert shortfall_p([100.0, 101, 99, 100, 102], [5], [100.0, 99, 101, 100, 98], [5], 9.0, False) <= 0.01
    assert shortfall_p([70.0, 71, 69, 70, 72], [5], [100.0, 99, 101, 100, 98], [5], 9.0, False) > 0.5


def test_the_design_effect_counts_correlated_launches_but_two_launches_a_side_barely_move_the_prior():
    from tools.stats import PRIOR_RHO, design_effect

    rng = np.random.default_rng(0)
    # Two launches a side whose offsets look huge: on their own they would say "a launch is one
    # sample" (design effect 3 at three samples a launch); two degrees of freedom only pull the
    # prior part of the way.
    two_each = [[[100.0, 100.1, 100.0], [110.0, 110.1, 110.0]], [[90.0, 90.1, 90.0], [80.0, 80.1, 80.0]]]
    assert 1 + 2 * PRIOR_RHO < design_effect(*two_each) <= 1 + 2 * (2 * 1.0 + 4 * PRIOR_RHO) / 6 + 1e-9
    # Many launches whose offsets dwarf the sample noise: samples of one launch are nearly copies.
    offsets = [[list(100 + off + rng.normal(0, 0.1, 4)) for off in rng.normal(0, 10, 12)] for _ in range(2)]
    assert design_effect(*offsets) > 3.0
    # The same data on one launch per side: nothing to tell launch spread from sample noise.
    assert design_effect([[1.0, 2.0, 3.0]], [[4.0, 5.0, 6.0]]) == 1.0


def test_a_one_slot_round_is_sized_so_a_clear_effect_can_decide_in_it():
    from tools.stats import PRIOR_RHO, _deflated, one_round_samples

    def best_p(n: int) -> float:  # every sample of one side beyond every sample of the other, A B A
        return _deflated(min_p_value(n, n), 1 + (2 * n / 3 - 1) * PRIOR_RHO)

    n = one_round_samples(alpha=0.01)
    assert best_p(6) > 0.01 / 4  # 6 + 6 decides only when nothing at all goes against it
    assert best_p(n) <= 0.01 / 4 and best_p(n - 1) > 0.01 / 4  # the fewest that leave a margin
    assert one_round_samples(alpha=0.01 / 3) > n  # one of three tests (Bonferroni) needs more
    assert one_round_samples(alpha=0.05) == 6  # never below six


def test_a_launch_is_priced_in_samples_from_the_measured_times_and_unknown_before_them():
    from tools.measure import Cost

    assert Cost(launches=2, samples=10, launch_s=20.0, sample_s=10.0).launch_in_samples() == 10.0
    assert Cost(launches=2, samples=10).launch_in_samples() is None  # a recording from before the times
    assert Cost(launches=1, launch_s=3.0).plus({"launches": 1, "launch_s": 1.5}).launch_s == 4.5


def test_one_launch_a_side_is_judged_with_the_spread_of_other_launches_never_as_independent_samples():
    from tools.stats import PRIOR_RHO, compare_launches, design_effect

    rng = np.random.default_rng(3)
    a, b = list(rng.normal(100, 1, 8)), list(rng.normal(90, 1, 8))
    alone = compare_launches(a, [8], b, [8], alpha=0.01)
    # Without context two launches are taken as 16 independent samples (the old, optimistic view)...
    assert alone.verdict == "different"
    # ...with the host's launches agreeing, it still decides, at the prior's cost at most...
    calm = [[list(100 + rng.normal(0, 1, 4)) for _ in range(3)] for _ in range(3)]
    assert compare_launches(a, [8], b, [8], context=calm, alpha=0.01).verdict == "different"
    # ...but where launches of one state differ by far more than the samples of one launch, two
    # launches are two samples: a 10 % gap between them is no evidence.
    wild = [[list(100 + off + rng.normal(0, 0.2, 4)) for off in rng.normal(0, 8, 6)] for _ in range(3)]
    assert compare_launches(a, [8], b, [8], context=wild, alpha=0.01).verdict == "unknown"
    # No launches to learn from: the prior, never "independent".
    assert design_effect([[1.0] * 8], [[2.0] * 8], per_launch=8) == 1 + 7 * PRIOR_RHO


def test_the_high_thresholds_ks_p_values_are_scipys_own_row_by_row():
    """``_ks_rows`` (the statistic of every row at once, scipy's p-value once per distinct
    statistic, kept across calls) gives exactly what ``ks_2samp(..., axis=1)`` gives, at equal and
    unequal sizes."""
    import warnings

    import numpy as np
    from scipy import stats

    from tools.stats import _ks_rows

    # each size pair twice, at two shifts: the second meets p-values kept from the first
    for n_a, n_b, shift in ((3, 10, 1.0), (5, 5, 0.5), (17, 48, 1.3), (2, 2, 3.0), (17, 48, 0.2), (5, 5, 2.0)):
        rng = np.random.default_rng(n_a * 7 + n_b + int(shift * 10))
        a, b = rng.normal(0, 1, (300, n_a)), rng.normal(shift, 1, (300, n_b))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = stats.ks_2samp(a, b, axis=1).pvalue
        assert np.array_equal(_ks_rows(a, b), want), (n_a, n_b)


def test_an_ab_s_p_values_are_scipys_own():
    """``p_values`` calls scipy's tests under their NaN-policy decorator where the samples are all
    finite (the decorator's work was most of a bisection's statistics): the same numbers, ties
    and unequal sizes included; a NaN still goes through scipy's policy."""
    import numpy as np
    from scipy import stats

    from tools.stats import p_values

    rng = np.random.default_rng(7)
    for n_a, n_b in ((3, 4), (8, 8), (12, 30), (60, 45)):
        a, b = np.round(rng.normal(100, 3, n_a)), np.round(rng.normal(102, 3, n_b))  # rounded: ties
        want = (stats.mannwhitneyu(a, b, alternative="two-sided").pvalue, stats.ks_2samp(a, b).pvalue)
        assert p_values(a, b) == want, (n_a, n_b)
    assert all(np.isnan(p_values(np.array([1.0, np.nan, 3.0]), np.array([2.0, 4.0, 5.0]))))


def test_one_launch_a_side_fully_apart_is_decided_by_how_far_apart_the_launches_are():
    """8 + 8 samples in one launch a side, every one of B above every one of A: the ranks, at
    the design effect of a launch spread the hunt measured, stop short of p <= 0.01 at any gap.
    The launch means decide a 47 % gap and leave a 0.5 % one (one launch's offset) unknown."""
    import numpy as np

    from tools.stats import compare, compare_launches, design_effect, launch_level_p

    rng = np.random.default_rng(7)

    def launch(level: float) -> list[float]:
        return sorted(level * rng.lognormal(0, 0.024, 8))

    # The hunt's one state measured on two launches, 3 % apart: a launch spread it measured.
    context = [[launch(89.0), launch(89.0 * 1.03)]]
    slow, fast = launch(62.0), launch(62.0 * 1.47)
    ranks = compare(slow, fast, design_effect=design_effect([slow], [fast], *context, per_launch=8), interval=False)
    assert ranks.verdict == "unknown" and min(fast) > max(slow)  # what the ranks alone said
    cmp = compare_launches(slow, [8], fast, [8], context=context, interval=False)
    assert cmp.verdict == "different" and cmp.p_value <= 0.01
    # Fully apart by a launch's offset only: not a change.
    a, b = [60.0 + 0.01 * i for i in range(8)], [60.3 + 0.01 * i for i in range(8)]
    assert launch_level_p([a], [b], context) > 0.01
    assert compare_launches(a, [8], b, [8], context=context, interval=False).verdict != "different"


def test_two_launches_a_launch_offset_apart_are_not_different_where_samples_are_tight():
    """The lab's uneven_steps: a culprit's parent and the culprit, one launch each, 75.49 against
    76.19 (0.9 % apart), every launch's samples within 0.2 %, the hunt's launch spread not yet
    measured. The rank test at the prior's design effect called that 'different' (the wrong way:
    the step was then not confirmed and the hunt went on for 30 more launches). Launches of a
    server differ by about 1 % however tight one launch's samples are: not a change, until the
    launch means say so; a 10 % step on the same samples still is."""
    import numpy as np

    from tools.stats import compare, compare_launches, design_effect

    rng = np.random.default_rng(11)
    parent = list(75.49 * rng.lognormal(0, 0.002, 8))
    culprit = list(76.19 * rng.lognormal(0, 0.002, 8))
    ranks = compare(parent, culprit, design_effect=design_effect([parent], [culprit], per_launch=8), interval=False)
    assert ranks.verdict == "different"  # what the rank test alone says
    cmp = compare_launches(parent, [8], culprit, [8], context=[], min_effect_pct=3.0, interval=False)
    assert cmp.verdict == "unknown" and cmp.p_value > 0.01
    step = list(68.0 * rng.lognormal(0, 0.002, 8))
    assert compare_launches(parent, [8], step, [8], context=[], interval=False).verdict == "different"


def test_launches_within_the_smallest_effect_that_matters_are_the_same_by_their_means():
    """A false culprit's A/B in the lab's uneven_steps: its parent and it, two launches a side
    (75.65 and 75.18 against 76.33 and 76.39 tok/s), samples within 0.3 %. The rank test calls
    1.1 % 'different', the launch means do not, and it took a third round (7-10 launches) before
    the samples said 'same'. The launch means' difference lies within the 6 % that would matter
    at the high threshold's error: 'same' now. The same launches 10 % apart are not."""
    import numpy as np

    from tools.stats import compare_launches

    rng = np.random.default_rng(17)

    def launch(level: float) -> list[float]:
        return list(level * rng.lognormal(0, 0.003, 8))

    parent = launch(75.65) + launch(75.18)
    culprit = launch(76.33) + launch(76.39)
    cmp = compare_launches(parent, [8, 8], culprit, [8, 8], context=[], min_effect_pct=6.0, interval=False)
    assert cmp.verdict == "same"
    slower = [x * 0.9 for x in culprit]
    cmp = compare_launches(parent, [8, 8], slower, [8, 8], context=[], min_effect_pct=6.0, interval=False)
    assert cmp.verdict != "same"


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (
            "srv mode=crash_after:3\nRuntimeError: CUDA error: an illegal memory access was encountered\n",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ),
        (  # vllm-project/vllm#8177: the NCCL watchdog's line, before any traceback
            "INFO serving\n[rank0]:[E219 12:14:43.351 ProcessGroupNCCL.cpp:1595] [PG ID 2 Rank 0] Process group "
            "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call\n",
            "[PG ID 2 Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal "
            "memory access was encountered",
        ),
        (  # vllm-project/vllm#20170
            "terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  NCCL error\n",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
        ),
        ("started\nFatal Python error: Segmentation fault\n", "Fatal Python error: Segmentation fault"),
        ("INFO: 127.0.0.1 - POST /v1/completions 200\n", None),
    ],
)
def test_a_server_that_dies_without_a_traceback_is_said_by_the_line_it_printed(log, said):
    """A crash is evidence, said in its own words: a trial's server printed its CUDA error and
    exited, and the report said "crashes on a request: no error in the log"."""
    from tools.serverlog import first_failure

    assert first_failure(log) == said
