"""Statistics for noisy benchmark samples: summaries with intervals, and A/B decisions with three outcomes.

One sample is noise. ``compare`` takes the smaller p-value of the Mann-Whitney U test (a shift
of the distribution) and the Kolmogorov-Smirnov test (a change of shape, e.g. of variance), as
Chromium's Pinpoint does, and answers:

- ``different``: p <= ``alpha`` (low threshold);
- ``same``: p above a *high* threshold: the p-value that a real change of the smallest size that
  matters (``min_effect_pct``) would exceed only ``beta`` of the time at these sample sizes and
  this noise. Above it, such a change is implausible;
- ``unknown``: in between, which means "take more samples", never a guess.

The high threshold is found by simulation (normal samples, the observed noise), vectorised with
scipy and cached per (sizes, normalised effect).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel

Verdict = Literal["different", "same", "unknown"]


class Summary(BaseModel):
    n: int
    median: float
    mean: float
    stdev: float
    cv: float
    q1: float
    q3: float
    ci_low: float  # bootstrap interval of the median
    ci_high: float
    confidence: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


class Comparison(BaseModel):
    """B against A (A is the reference, e.g. the good state)."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    delta_pct: float  # (median B - median A) / median A * 100
    delta_ci_low: float | None = None
    delta_ci_high: float | None = None
    p_value: float  # min(Mann-Whitney U, Kolmogorov-Smirnov)
    p_mwu: float
    p_ks: float
    alpha: float
    high_threshold: float | None
    verdict: Verdict
    # One-sided p-value that the better side beats the other by at least the smallest effect
    # that matters (``shortfall_p``); set by callers that know which side should be better.
    p_shortfall: float | None = None
    # Why no more samples were taken while the answer is still unknown (the budget that stopped it).
    stopped: str | None = None


def summarize(samples: Sequence[float], confidence: float = 0.95, seed: int = 0) -> Summary:
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    mean = float(x.mean())
    q1, med, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    lo, hi = _bootstrap_median_ci(x, confidence, seed)
    return Summary(
        n=int(x.size),
        median=med,
        mean=mean,
        stdev=sd,
        cv=sd / mean if mean else 0.0,
        q1=q1,
        q3=q3,
        ci_low=lo,
        ci_high=hi,
        confidence=confidence,
    )


def _bootstrap_median_ci(x: np.ndarray, confidence: float, seed: int, rounds: int = 2000) -> tuple[float, float]:
    if x.size < 2:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(x, size=(rounds, x.size), replace=True), axis=1)
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(meds, tail)), float(np.percentile(meds, 100 - tail))


def p_values(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(Mann-Whitney U two-sided, Kolmogorov-Smirnov two-sample) p-values."""
    from scipy import stats  # imported when first used: a second of every CLI start

    if a.size == 0 or b.size == 0:
        return 1.0, 1.0
    if np.all(a == a[0]) and np.all(b == b[0]):
        return (1.0, 1.0) if a[0] == b[0] else (min_p_value(a.size, b.size),) * 2
    mannwhitneyu, ks_2samp = stats.mannwhitneyu, stats.ks_2samp
    if np.isfinite(a).all() and np.isfinite(b).all():  # scipy's NaN policy has nothing to do
        mannwhitneyu, ks_2samp = (getattr(f, "__wrapped__", f) for f in (mannwhitneyu, ks_2samp))
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue), _ks_pvalue(ks_2samp, a, b)


def _ks_pvalue(ks_2samp, a: np.ndarray, b: np.ndarray) -> float:
    """``ks_2samp``'s p-value (scipy's, decorated or not), its warning about falling back from the
    exact method to the asymptotic one for some sizes silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ks_2samp(a, b).pvalue)


def noise_sd(a: np.ndarray, b: np.ndarray) -> float:
    """A robust pooled standard deviation (IQR-based, falling back to the sample sd)."""
    parts = []
    for x in (a, b):
        if x.size >= 4:
            q1, q3 = np.percentile(x, [25, 75])
            parts.append((q3 - q1) / 1.349 or float(x.std(ddof=1)))
        elif x.size >= 2:
            parts.append(float(x.std(ddof=1)))
    return float(np.sqrt(np.mean(np.square(parts)))) if parts else 0.0


# The error of calling 'same' an effect as large as the smallest that matters (the high
# threshold's beta; the launch means' two one-sided tests use it too).
SAME_BETA = 0.001


@lru_cache(maxsize=4096)
def high_threshold(n_a: int, n_b: int, magnitude: float, beta: float = SAME_BETA, trials: int = 2000) -> float:
    """The p-value exceeded with probability ``beta`` when there *is* a shift of ``magnitude``
    standard deviations, at these sample sizes (simulated; ``magnitude`` is rounded by the caller)."""
    from scipy import stats  # imported when first used: a second of every CLI start

    if magnitude <= 0:
        return 1.0
    rng = np.random.default_rng(12345 + 7919 * n_a + 104729 * n_b + int(magnitude * 1000))
    a = rng.normal(0.0, 1.0, size=(trials, n_a))
    b = rng.normal(magnitude, 1.0, size=(trials, n_b))
    mwu = stats.mannwhitneyu(a, b, alternative="two-sided", axis=1).pvalue
    p = np.minimum(mwu, _ks_rows(a, b))
    return float(np.quantile(p, 1.0 - beta))


def _ks_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``stats.ks_2samp(a, b, axis=1).pvalue``, the same numbers, many times faster: the statistic
    of every row at once, and scipy's p-value once per distinct statistic (it depends on the sizes
    and the statistic only; a few dozen values among thousands of rows), kept across calls by
    ``_ks_p``. ``ks_2samp`` with ``axis=1`` loops over rows in Python, and a bisection whose probes
    grow an eighth at a time meets many sizes: most of a hard bisection's time was these
    simulations."""
    n_a, n_b = a.shape[1], b.shape[1]
    order = np.argsort(np.concatenate([a, b], axis=1), axis=1, kind="stable")
    from_a = order < n_a
    gap = np.abs(np.cumsum(from_a, axis=1) * n_b - np.cumsum(~from_a, axis=1) * n_a)
    h = gap.max(axis=1)  # the statistic times n_a * n_b: an exact integer, so rows group exactly
    p = np.empty(len(h))
    for value in np.unique(h):
        rows = np.flatnonzero(h == value)
        p[rows] = _ks_p(n_a, n_b, int(value), a[rows[0]], b[rows[0]])
    return p


_KS_P: dict[tuple[int, int, int], float] = {}


def _ks_p(n_a: int, n_b: int, h: int, a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample KS p-value of ``a`` and ``b``, whose statistic times ``n_a * n_b`` is ``h``:
    scipy's own number, computed once per (sizes, statistic) and kept (the same few sizes and
    statistics recur at every effect size a bisection simulates). ``ks_2samp.__wrapped__`` is the
    function under scipy's NaN-policy decorator, whose argument handling cost six times the test
    itself at these sizes; the samples here are simulated normals, never NaN."""
    key = (n_a, n_b, h)
    if key not in _KS_P:
        from scipy import stats  # imported when first used: a second of every CLI start

        _KS_P[key] = _ks_pvalue(getattr(stats.ks_2samp, "__wrapped__", stats.ks_2samp), a, b)
    return _KS_P[key]


def compare(
    a: Sequence[float],
    b: Sequence[float],
    alpha: float = 0.01,
    min_effect_pct: float | None = None,
    beta: float = SAME_BETA,
    interval: bool = True,
    seed: int = 0,
    design_effect: float = 1.0,
) -> Comparison:
    """Is B different from A? See the module docstring for the three verdicts.

    Without ``min_effect_pct`` there is no high threshold: the answer is ``different`` or
    ``unknown`` (no change too small to matter was named, so none can be ruled out).
    ``design_effect`` > 1: the samples are correlated in clusters (launches), worth
    n / design_effect independent ones: each test statistic's z-score is shrunk by its square root
    and the high threshold is simulated at the effective sizes."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise ValueError("compare needs samples on both sides")
    p_mwu, p_ks = p_values(xa, xb)
    if design_effect > 1.0:
        p_mwu, p_ks = _deflated(p_mwu, design_effect), _deflated(p_ks, design_effect)
    p = min(p_mwu, p_ks)
    med_a, med_b = float(np.median(xa)), float(np.median(xb))
    delta = (med_b - med_a) / med_a * 100 if med_a else math.nan
    ht = None
    if min_effect_pct is not None:
        sd = noise_sd(xa, xb)
        magnitude = abs(min_effect_pct / 100 * med_a) / sd if sd > 0 else math.inf
        magnitude = min(round(magnitude, 1), 20.0)
        n_a, n_b = (max(2, round(x.size / design_effect)) for x in (xa, xb))
        ht = high_threshold(n_a, n_b, magnitude, beta)
    if p <= alpha:
        verdict: Verdict = "different"
    elif ht is not None and p > ht and abs(delta) < min_effect_pct:  # type: ignore[operator]
        # A median difference beyond the smallest effect that matters is no evidence of "same",
        # whatever few noisy samples make of the p-value (a lab run: +13.6 %, p = 0.079, "same").
        verdict = "same"
    else:
        verdict = "unknown"
    lo = hi = None
    if interval:
        rng = np.random.default_rng(seed)
        ra = np.median(rng.choice(xa, size=(2000, xa.size)), axis=1)
        rb = np.median(rng.choice(xb, size=(2000, xb.size)), axis=1)
        rel = (rb - ra) / np.where(ra == 0, math.nan, ra) * 100
        lo, hi = (float(v) for v in np.nanpercentile(rel, [2.5, 97.5]))
    return Comparison(
        n_a=int(xa.size),
        n_b=int(xb.size),
        median_a=med_a,
        median_b=med_b,
        delta_pct=delta,
        delta_ci_low=lo,
        delta_ci_high=hi,
        p_value=p,
        p_mwu=p_mwu,
        p_ks=p_ks,
        alpha=alpha,
        high_threshold=ht,
        verdict=verdict,
    )


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value a Mann-Whitney test can give with these sample sizes."""
    if n_a == 0 or n_b == 0:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def split_launches(samples: Sequence[float], groups: Sequence[int]) -> list[list[float]]:
    """The samples of each launch, in order (``groups``: how many samples each launch gave; samples
    beyond the groups' total, from before groups were kept, count as one launch)."""
    out, i = [], 0
    for n in groups:
        if n > 0:
            out.append(list(samples[i : i + n]))
        i += n
    if i < len(samples):
        out.append(list(samples[i:]))
    return out


def _deflated(p: float, design_effect: float) -> float:
    """A two-sided p-value as it would be with the z-score shrunk by sqrt(design_effect)."""
    from scipy import stats  # imported when first used: a second of every CLI start

    if p >= 1.0:
        return 1.0
    z = float(stats.norm.isf(p / 2))
    return float(min(1.0, 2 * stats.norm.sf(z / math.sqrt(design_effect))))


def _anova(sides) -> tuple[float, int, float, int, int, int]:
    """(SS between, df between, SS within, df within, samples, launches) of the samples on their
    launch, within each side (each side's own mean removed, so an A/B difference is not counted
    as launch-to-launch variance)."""
    ss_between = ss_within = 0.0
    df_between = df_within = n = k = 0
    for launches in sides:
        usable = [np.asarray(g, dtype=float) for g in launches if len(g) >= 1]
        if len(usable) < 2:
            continue
        grand = float(np.mean(np.concatenate(usable)))
        ss_between += sum(g.size * (float(g.mean()) - grand) ** 2 for g in usable)
        ss_within += sum(float(((g - g.mean()) ** 2).sum()) for g in usable)
        df_between += len(usable) - 1
        df_within += sum(g.size - 1 for g in usable)
        n += sum(g.size for g in usable)
        k += len(usable)
    return ss_between, df_between, ss_within, df_within, n, k


def launch_effect_p(*sides: Sequence[Sequence[float]]) -> float:
    """One-way ANOVA of the samples on their launch, within each side, pooled: the p-value that
    launch-to-launch variance is zero. 1.0 when no side has two launches."""
    ss_between, df_between, ss_within, df_within, _n, _k = _anova(sides)
    if df_between == 0 or df_within == 0 or ss_within <= 0:
        return 1.0
    f = (ss_between / df_between) / (ss_within / df_within)
    from scipy.stats import f as f_dist

    return float(f_dist.sf(f, df_between, df_within))


# The intra-launch correlation assumed before any launch-to-launch spread is measured (a spread
# a third of the sample noise: rho = 1 / (1 + 9)), and how many between-launch degrees of freedom
# that prior is worth. Two A/B sides of two launches each give two such degrees of freedom: an
# ANOVA on them alone swings rho anywhere in [0, 1] and would turn a clean +50 % A/B "unknown".
PRIOR_RHO = 0.1
PRIOR_DF = 4
# The least launch-to-launch spread assumed for a server, as a coefficient of variation, until
# the hunt measures its own: the lab's default ``launch_cv``, and under what separates fresh
# launches of one vLLM server, model and workload on two hosts (83.0-83.2 against 85.4-85.8 tok/s,
# vllm-project/vllm#42484). A prior relative to the sample noise alone (``PRIOR_RHO``) assumes
# 0.07 % where one launch's samples sit within 0.2 %, and a rank test on one launch a side then
# called two launches of one state 0.9 % apart "different" (p = 0.0025, the lab's uneven_steps).
PRIOR_LAUNCH_CV = 0.01


def design_effect(*sides: Sequence[Sequence[float]], per_launch: float | None = None) -> float:
    """How many samples one independent sample is worth when samples come in launches (Kish's
    design effect 1 + (m - 1) rho, with m the mean samples per launch and rho the intra-launch
    correlation: the one-way ANOVA estimator, shrunk toward ``PRIOR_RHO`` by its degrees of
    freedom). 1.0 when no side has two launches to tell launch-to-launch variance from sample
    noise.

    ``per_launch``: the m of the samples being judged, when rho comes from other launches (an A/B
    of one launch a side, judged with the spread of the hunt's earlier states); with no launch
    to estimate rho from, the prior's."""
    ss_between, df_between, ss_within, df_within, n, k = _anova(sides)
    if df_between == 0 or df_within == 0:
        return 1.0 + (per_launch - 1) * PRIOR_RHO if per_launch else 1.0
    msb, msw = ss_between / df_between, ss_within / df_within
    m = n / k
    if msw <= 0:
        return per_launch or m  # identical samples within each launch: a launch is one sample
    measured = max(0.0, (msb - msw) / (msb + (m - 1) * msw))
    rho = (df_between * measured + PRIOR_DF * PRIOR_RHO) / (df_between + PRIOR_DF)
    return 1.0 + ((per_launch or m) - 1) * rho


def one_round_samples(alpha: float = 0.01, margin: float = 4.0, least: int = 6, most: int = 20) -> int:
    """Samples per side for a one-slot A/B (A B A: three launches) that can decide alone: the
    fewest whose best outcome (every sample of one side beyond every sample of the other) reaches
    ``alpha / margin`` at the prior design effect of its launches. 6 + 6 reaches 0.007 at best:
    any launch-to-launch spread the round measures, or one overlapping sample, leaves a 33 % drop
    "unknown" and costs a second round of three launches; 8 + 8 reaches 0.0016."""
    for n in range(least, most + 1):
        per_launch = 2 * n / 3
        if _deflated(min_p_value(n, n), 1.0 + (per_launch - 1) * PRIOR_RHO) <= alpha / margin:
            return n
    return most


def compare_launches(
    a: Sequence[float],
    a_groups: Sequence[int],
    b: Sequence[float],
    b_groups: Sequence[int],
    context: Sequence[Sequence[Sequence[float]]] | None = None,
    **kwargs,
) -> Comparison:
    """``compare`` for samples that come in launches (a server restarted between groups). Samples
    of one launch share that launch's offset (weights placement, clocks, a neighbour), so they are
    not independent: both sides' launches give the intra-launch correlation, and the comparison
    counts the samples as n / design effect independent ones (``compare(design_effect=...)``).
    No launch-to-launch variance: the samples pool as they are; all of it: a launch counts once.
    ``context``: other states' samples by launch (each a list of launches), measured in the same
    place: their launch-to-launch spread counts too. What an A/B of one launch per side needs, as
    neither of its sides alone can tell a launch's offset from noise (without context its design
    effect would be 1: every sample independent; with an empty context, the prior's)."""
    sides = [split_launches(a, a_groups), split_launches(b, b_groups), *(context or ())]
    per_launch = (len(a) + len(b)) / max(1, len(sides[0]) + len(sides[1])) if context is not None else None
    cmp = compare(a, b, design_effect=design_effect(*sides, per_launch=per_launch), **kwargs)
    if context is None:
        return cmp
    # Launches judged with other states' spread: the question is whether these launches differ
    # more than launches of one state do, which is the launch means' t-test (``launch_level``).
    # The rank test on the samples, even at a design effect, counts a launch's offset as part of
    # the change where the spread was measured small or not at all: 'different' needs both. Where
    # every sample of one side lies beyond every sample of the other, the ranks have said all
    # they can (8 + 8 at a measured spread's design effect stop short of p <= 0.01 whether the gap
    # is 5 % or 47 %): the launch means decide alone.
    level = launch_level(sides[0], sides[1], list(context))
    if level is None:
        return cmp
    p, apart = level.p, min(a) > max(b) or min(b) > max(a)
    if p <= cmp.alpha and cmp.verdict == "different":
        return cmp.model_copy(update={"p_value": max(p, cmp.p_value)})  # the weaker of the two
    if p <= cmp.alpha and apart:
        return cmp.model_copy(update={"p_value": p, "verdict": "different"})
    # 'same' the same way: the launch means' difference within the smallest effect that matters,
    # at the high threshold's error each way. The rank test's 'same' counts the samples at the
    # design effect, where one launch a side is worth about two samples and no count of them
    # exceeds its threshold; and two launches a side 1.1 % apart on samples within 0.3 % are
    # 'different' to it and 'unknown' here: a false culprit's A/B took three rounds (7-10 launches)
    # to say 'same' (the lab's uneven_steps).
    effect, beta = kwargs.get("min_effect_pct"), kwargs.get("beta", SAME_BETA)
    if cmp.verdict != "same" and effect is not None and abs(cmp.delta_pct) < effect:
        bound = math.log1p(effect / 100) if level.logs else effect / 100 * abs(cmp.median_a)
        if level.within(bound, beta):
            return cmp.model_copy(update={"p_value": p, "verdict": "same"})
    if cmp.verdict == "different":
        return cmp.model_copy(update={"p_value": p, "verdict": "unknown"})
    return cmp


class LaunchLevel(NamedTuple):
    """Two states' launch means compared (``launch_level``): their difference, its standard
    error and degrees of freedom, in log units where every value is positive (``logs``)."""

    diff: float
    se: float
    df: float
    logs: bool

    @property
    def p(self) -> float:
        """Two-sided p-value that the launches differ beyond what launches of one state do."""
        from scipy import stats  # imported when first used: a second of every CLI start

        if self.se <= 0:
            return 0.0 if self.diff else 1.0
        return float(2 * stats.t.sf(abs(self.diff) / self.se, self.df))

    def within(self, bound: float, beta: float) -> bool:
        """Is the difference within +-``bound`` (in the same units) at error ``beta`` each way
        (two one-sided tests: the interval ``diff +- t(beta) se`` inside the bound)?"""
        from scipy import stats  # imported when first used: a second of every CLI start

        return abs(self.diff) + float(stats.t.isf(beta, self.df)) * self.se < bound


def launch_level(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], context: Sequence[Sequence[Sequence[float]]]
) -> LaunchLevel | None:
    """Two states' launches compared as launches: a t-test on the log samples' launch means, each
    launch's mean carrying the launch-to-launch spread (from ``context``'s states, each measured
    on two launches or more, shrunk by ``PRIOR_DF`` degrees of freedom toward ``PRIOR_RHO``'s
    spread or ``PRIOR_LAUNCH_CV``, whichever is larger) and its samples' own noise. Logs: a
    launch's offset scales its samples. Differences where a value is not positive. None where a
    side has no launch or no launch has two samples."""
    launches = [[np.asarray(g, dtype=float) for g in side if len(g)] for side in (a, b, *context)]
    if not launches[0] or not launches[1]:
        return None
    every = np.concatenate([g for side in launches for g in side])
    logs = bool(every.min() > 0)
    if logs:
        launches = [[np.log(g) for g in side] for side in launches]
    ss_w = sum(float(((g - g.mean()) ** 2).sum()) for side in launches for g in side)
    df_w = sum(g.size - 1 for side in launches for g in side)
    if df_w == 0:
        return None
    var_w = ss_w / df_w
    ss_b = df_b = 0.0
    for side in launches:  # every state's launches, the A/B's own where it has two or more
        if len(side) < 2:
            continue
        means = np.array([g.mean() for g in side])
        sizes = np.array([g.size for g in side])
        ss_b += float(((means - means.mean()) ** 2).sum())  # launch means' own spread
        ss_b -= var_w * float((1 / sizes).sum()) * (len(side) - 1) / len(side)  # less their noise
        df_b += len(side) - 1
    prior = PRIOR_RHO / (1 - PRIOR_RHO) * var_w
    if logs:  # a coefficient of variation is a spread of the logs
        prior = max(prior, PRIOR_LAUNCH_CV**2)
    var_l = (max(0.0, ss_b) + PRIOR_DF * prior) / (df_b + PRIOR_DF)
    (ma, na, ka), (mb, nb, kb) = (
        (float(np.mean([g.mean() for g in side])), sum(g.size for g in side), len(side)) for side in launches[:2]
    )
    se = math.sqrt(var_l * (1 / ka + 1 / kb) + var_w * (1 / na + 1 / nb))
    return LaunchLevel(diff=mb - ma, se=se, df=df_b + PRIOR_DF, logs=logs)


def launch_level_p(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], context: Sequence[Sequence[Sequence[float]]]
) -> float:
    """``launch_level``'s two-sided p-value (1.0 where it cannot be computed)."""
    level = launch_level(a, b, context)
    return level.p if level is not None else 1.0


def shortfall_p(
    better: Sequence[float],
    better_groups: Sequence[int],
    worse: Sequence[float],
    worse_groups: Sequence[int],
    min_effect_pct: float,
    higher_is_better: bool = True,
) -> float:
    """How plausible is it that ``better`` beats ``worse`` by at least ``min_effect_pct``?

    A one-sided Mann-Whitney test of ``better`` against ``worse`` moved by the smallest effect
    that matters (H0: the gain is at least that large). A small p-value says the gain, if any,
    is smaller than what could explain the regression: a hypothesis that needs it is refuted
    without more samples, even when the two-sided test cannot yet tell the sides apart (a
    "-5 %, p = 0.3" where a +9 % gain is needed). Samples of one launch count as correlated
    (the same design effect as ``compare_launches``)."""
    from scipy import stats  # imported when first used: a second of every CLI start

    xa, xb = np.asarray(better, dtype=float), np.asarray(worse, dtype=float)
    if xa.size == 0 or xb.size == 0:
        return 1.0
    shift = 1 + min_effect_pct / 100 if higher_is_better else 1 - min_effect_pct / 100
    alternative = "less" if higher_is_better else "greater"
    p = float(stats.mannwhitneyu(xa, xb * shift, alternative=alternative).pvalue)
    deff = design_effect(split_launches(better, better_groups), split_launches(worse, worse_groups))
    if deff > 1.0 and p < 1.0:
        p = float(stats.norm.sf(float(stats.norm.isf(p)) / math.sqrt(deff)))
    return p
