"""Statistics for noisy benchmark samples: summaries with bootstrap intervals, and A/B rank tests.

One sample is noise. A comparison uses the Mann-Whitney U rank test (no normality assumption,
robust to the odd slow outlier) and reports the relative change of medians with a bootstrap
interval, so "same" and "different" are decided at a stated significance, never by a threshold
on a single number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel
from scipy import stats


class Summary(BaseModel):
    n: int
    median: float
    mean: float
    stdev: float
    cv: float
    ci_low: float  # bootstrap interval of the median
    ci_high: float
    confidence: float


class Comparison(BaseModel):
    """B against A (A is the reference, e.g. the good state)."""

    a: Summary
    b: Summary
    delta_pct: float  # (median B - median A) / median A * 100
    delta_ci_low: float
    delta_ci_high: float
    p_value: float
    alpha: float
    verdict: Literal["different", "same", "undecided"]


def summarize(samples: Sequence[float], confidence: float = 0.95, seed: int = 0) -> Summary:
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("no samples to summarize")
    med = float(np.median(x))
    sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    lo, hi = _bootstrap_median_ci(x, confidence, seed)
    mean = float(x.mean())
    return Summary(
        n=int(x.size),
        median=med,
        mean=mean,
        stdev=sd,
        cv=sd / mean if mean else 0.0,
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


def compare(a: Sequence[float], b: Sequence[float], alpha: float = 0.01, seed: int = 0) -> Comparison:
    """Is B different from A? Mann-Whitney U (two-sided) plus a bootstrap interval of the change.

    ``undecided`` means the samples cannot reach ``alpha`` even in principle (too few of them):
    take more samples rather than guess.
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    sa, sb = summarize(xa, seed=seed), summarize(xb, seed=seed)
    p = float(stats.mannwhitneyu(xa, xb, alternative="two-sided").pvalue) if xa.size and xb.size else 1.0
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(xa, size=(2000, xa.size)), axis=1)
    rb = np.median(rng.choice(xb, size=(2000, xb.size)), axis=1)
    rel = (rb - ra) / np.where(ra == 0, math.nan, ra) * 100
    lo, hi = (float(v) for v in np.nanpercentile(rel, [2.5, 97.5]))
    if p < alpha:
        verdict = "different"
    elif min_p_value(xa.size, xb.size) >= alpha:
        verdict = "undecided"
    else:
        verdict = "same"
    delta = (sb.median - sa.median) / sa.median * 100 if sa.median else math.nan
    return Comparison(
        a=sa, b=sb, delta_pct=delta, delta_ci_low=lo, delta_ci_high=hi, p_value=p, alpha=alpha, verdict=verdict
    )


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value a Mann-Whitney test can give with these sample sizes."""
    if n_a == 0 or n_b == 0:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))
