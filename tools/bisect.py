"""Noisy bisection over a commit graph: find the commit(s) where a metric stepped, with statistics.

``git bisect`` asks a script "good or bad?" once per commit; on a noisy benchmark one sample
cannot answer. Here each probe is a set of samples compared with the good and bad references:

- ``bad``  when it differs from the good reference (Mann-Whitney/KS, p <= alpha) by at least a
  quarter of the good-to-bad change, in the regression's direction;
- ``good`` when it is statistically the *same* as the good reference (see ``tools.stats``), or
  clearly different from bad while no longer distinguishable from good by a change that matters;
- otherwise more samples (doubling up to a cap); at the cap, the nearer reference decides and the
  probe is marked low-confidence.

The search runs on the whole graph ``good..bad`` as git sees it (merged side branches included;
``first_parent`` restricts it to the mainline): probing ``c`` and finding it bad keeps only ``c``'s
ancestors; good removes them. The midpoint splits the candidates most evenly, like git's.
A probe that cannot build or launch is *skipped* (its commit stays a suspect; nothing after a
broken stretch is blamed alone). When the bad end still differs from the first culprit's level,
the search continues above it: several steps give several culprits. Each culprit is verified
with a fresh "sandwich": its parent against it, re-measured. ``k > 1`` probes k commits per round
(a pool of hosts), which git bisect cannot do.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from tools.stats import compare, noise_sd


class ProbeError(RuntimeError):
    """The state cannot be measured (does not build, launch or answer): bisection skips it."""


class BisectError(RuntimeError):
    """The bisection cannot start: a reference (good or bad) cannot be measured."""


class SampleBudgetSpent(Exception):
    """The next request would take the bisection past ``BisectConfig.max_total_samples``."""


# probe(sha, n) -> n new samples of the metric at that commit (higher is better unless told).
Probe = Callable[[str, int], list[float]]


class ProbeRecord(BaseModel):
    sha: str
    verdict: Literal["good", "bad", "skip"]
    samples: int
    median: float | None
    p_vs_good: float | None
    p_vs_bad: float | None
    confident: bool
    round: int


class Culprit(BaseModel):
    sha: str
    parent: str | None
    suspects: list[str]  # == [sha] when exact; more when skipped commits border it
    delta_pct: float | None  # parent -> culprit, from the verification sandwich
    p_value: float | None
    verified: bool


class BisectResult(BaseModel):
    culprits: list[Culprit]
    rejected: list[Culprit] = []  # further steps the verification sandwich did not confirm
    probes: int  # distinct commits measured while searching (references and sandwiches excluded)
    total_states: int  # everything measured: references, probes, sandwiches
    samples: int  # all of them: references, probes, step checks, verification
    verification_samples: int  # of which the sandwiches (fresh parent/culprit A/Bs)
    rounds: int
    skipped: list[str]
    confidence: float  # share of probe decisions made below the sample cap
    records: list[ProbeRecord]
    candidates: int  # commits in good..bad
    stopped: str | None = None  # the budget that ended the bisection early, if one did
    # Where in ``records`` the last search began (above the last culprit): a search above a step
    # judges its probes against that step's level, so only its own records narrow its range.
    last_search_from: int = Field(default=0, exclude=True)


class BisectConfig(BaseModel):
    # The sequential test's error per probe (its bound is log(1/alpha) nats). bench/bisect_cost.py
    # --hard: 0.001 bought 4 points of exactness in the hardest cells with 20-25 % more samples
    # than Pinpoint's; 0.0015 is at least as exact as Pinpoint with fewer samples in each.
    alpha: float = 0.0015
    beta: float = 0.0015
    ref_samples: int = 10  # per reference (good, bad): they shape the densities every probe is tested against
    # Samples of each reference the caller already holds (an A/B of the two ends): when they
    # tell the ends apart beyond doubt, the references stay at that size instead of ref_samples
    # (on a one-slot host each top-up is a launch).
    known_ref_samples: int = 0
    clear_gap_sd: float = 6.0  # "beyond doubt": the medians this many noise sds apart, p <= 0.01
    initial_samples: int = 3  # per probe, then +2 at a time (a sequential test needs few)
    step_samples: int = 2
    # A probe still undecided grows by this fraction of its samples (at least ``step_samples``):
    # fine steps stop it close to where the test decides, where growing by half overshot a
    # decision by a quarter of the samples on average (bench/bisect_cost.py --hard).
    step_growth: float = 0.125
    # The references grow with a probe that outgrows them, to this multiple of their size (at
    # least the probe's). 1: step for step with the probe, so the ends are measured often and the
    # drift fit stands on samples spread in time (the hard bench's drift cell: 80 % exact at 1,
    # 74 % at 1.5). Where launches are dear the hunt sets 1.5: a reference's top-up there is a
    # launch, and the probe's next samples another.
    ref_growth: float = 1.0
    max_samples: int = 48
    llr_clip: float = 3.0  # nats: one sample can move the log-likelihood ratio at most this far
    consistency_p: float = 0.05  # the SPRT may call c good (bad) only if c vs good (bad) has p >= this
    min_effect_fraction: float = 0.25  # of the good->bad change: smaller steps do not count
    # Each probe is one server launch, whose offset all its samples carry (launches of one state
    # differ by about 1 %, more than one launch's samples do). A rank test then tells two launches
    # of one level apart, so the rank tests' consistency check of the likelihood ratio is not
    # applied (the level gate, the smallest step that counts, stands in for it). False for a
    # benchmark command (each sample its own process) and the bench.
    launch_offsets: bool = False
    # Set by ``bisect`` for a search above a culprit: the whole good->bad change, in percent, whose
    # quarter (``min_effect_fraction``) stays the smallest step that counts there.
    whole_change_pct: float | None = None
    higher_is_better: bool = True
    k: int = 1
    verify: bool = True
    sandwich_samples: int = 5  # per side: the fewest for which Mann-Whitney can reach p <= 0.01
    max_culprits: int = 4
    # "Another step above this culprit?" is asked on the culprit's samples, grown to this many while
    # the rank test against the bad end is undecided and the gap could be a step. On the samples it
    # happened to have (3 to 9), the hard bench's staircase lost its second step in 27 of 100
    # trials at p 0.01-0.06; grown to 12: 8 of 100, for 9 more samples there and 0.5-2.4 in
    # single-step cells (bench/bisect_cost.py --hard). 20 bought 2 more trials for 1.4 more samples.
    step_check_samples: int = 12
    # Fresh samples of each reference taken beside every probe; the probe is then compared with
    # the references' most recent samples (as many as it has, at least ref_samples), so a level
    # that drifts over a long search (a machine's load) falls on both sides alike. Worth it where a
    # sample costs no launch (a benchmark command: the hunt sets 1); on a one-slot server host it
    # would be two launches per probe, so 0 (the references measured once, at the start).
    ref_refresh: int = 0
    # Commits known not to change the metric (they touch no file the workload executes: see
    # tools.codepath). Never probed and never blamed: the search splits only the others, and a
    # step between two probed commits lands on the one that is not a no-op.
    no_ops: list[str] = []
    # Fit the machine's drift (a slope of log(metric) per sample taken, from the spread in time of
    # each commit's own samples: the references, grown as probes outgrow them, are measured early
    # and late) and judge every probe on samples moved to one moment. bench/bisect_cost.py --hard:
    # a 5 % step under 5 % noise drifting -0.02 % a sample went from 53 % exact to 79 %.
    detrend: bool = True
    # The likelihood ratio's densities: "t" (a Student-t, 4 degrees of freedom, at each
    # reference's median with their pooled robust sd: sharper than a kernel density of ten samples,
    # and an outlier moves it little) or "kde" (each reference's kernel density: any shape).
    llr_model: Literal["kde", "t"] = "t"
    # Samples the whole bisection may take (references, probes, step checks, sandwiches). A
    # request that would pass it is not taken: the bisection ends there with the culprits it has
    # confirmed so far and ``BisectResult.stopped`` saying so. None: no cap.
    max_total_samples: int | None = None

    @classmethod
    def for_probes(cls, bench_command: bool, **settings) -> BisectConfig:
        """The config for what one probe is, so that a hunt and ``sleuth bisect`` judge alike: a
        benchmark command (each sample its own process: a fresh sample of each end beside every
        probe costs no launch, and samples carry no launch offset) or a server launch (each probe
        one launch, whose offset all its samples carry; the ends measured once). A pool of k hosts
        keeps its ends measured once either way: a fresh end beside each of k probes would be
        measured on whichever host was free."""
        fresh = bench_command and settings.get("k", 1) == 1
        return cls(ref_refresh=1 if fresh else 0, launch_offsets=not bench_command, **settings)


class _Samples:
    """Samples per commit, fetched through the probe and kept (a state is never re-measured)."""

    def __init__(self, probe: Probe, sandwich_n: int) -> None:
        self.probe = probe
        self.sandwich_n = sandwich_n
        self.data: dict[str, list[float]] = {}
        self.times: dict[str, list[int]] = {}  # each sample's position in the order all were taken
        self.lock = threading.Lock()
        self.total = 0
        self.fresh_total = 0
        self.ref_n = 0  # samples per reference (good, bad), set by bisect()
        self.budget: int | None = None  # BisectConfig.max_total_samples
        self.asked = 0  # samples requested and not yet returned (k probes in flight at once)

    @contextmanager
    def _taking(self, sha: str, n: int, in_place: bool) -> Iterator[list[float]]:
        """Take ``n`` new samples of ``sha`` (the list it yields, filled once the probe returns),
        holding them against the budget while they are taken: SampleBudgetSpent where they would
        pass it, counting what other probes in flight have asked for. The samples join the
        commit's, and the count, in one step with their release from ``asked``."""
        with self.lock:
            if self.budget is not None and self.total + self.asked + n > self.budget:
                raise SampleBudgetSpent(f"sample budget of {self.budget} spent ({self.total} taken)")
            self.asked += n
        new: list[float] = []
        try:
            new += [float(x) for x in self.probe(sha, n)]
            yield new
        finally:
            with self.lock:
                self.asked -= n
                if new:  # ``in_place``: the commit's list grows (else a new one: lists handed out stay as they were)
                    if in_place:
                        self.data.setdefault(sha, []).extend(new)
                    else:
                        self.data[sha] = self.data.get(sha, []) + new
                    self.times.setdefault(sha, []).extend(range(self.total, self.total + len(new)))
                    self.total += len(new)

    def fresh(self, sha: str, n: int) -> list[float]:
        """n new samples (never cached ones), which then join the commit's samples."""
        if n <= 0:
            return []
        with self._taking(sha, n, in_place=True) as new:
            pass
        with self.lock:
            self.fresh_total += len(new)
        return new

    def drift(self) -> float:
        """The level's slope per sample taken, in log units, from within-commit spread in time (a
        commit measured early and again late shows the machine's drift, whatever its level):
        the pooled least-squares slope of each commit's log-samples on their times, residuals
        clipped at 3 robust sds (outliers), shrunk toward 0 by its own standard error."""
        num = den = 0.0
        resid: list[float] = []
        with self.lock:
            items = [(np.asarray(self.data[s], dtype=float), np.asarray(self.times[s], dtype=float)) for s in self.data]
        for x, t in items:
            if x.size < 4 or np.ptp(t) < x.size:
                continue  # one batch: no spread in time beyond its own
            y = np.log(np.abs(x))
            y = y - np.median(y)
            mad = 1.4826 * float(np.median(np.abs(y))) or 1e-9
            y = np.clip(y, -3 * mad, 3 * mad)
            tc = t - t.mean()
            num += float(tc @ y)
            den += float(tc @ tc)
            resid.append(float(np.var(y)))
        if den <= 0:
            return 0.0
        beta = num / den
        se2 = (float(np.mean(resid)) if resid else 0.0) / den
        return beta * max(0.0, 1.0 - se2 / (beta * beta)) if beta else 0.0

    def at_now(self, sha: str, xs: list[float], beta: float) -> list[float]:
        """``xs`` (the latest ``len(xs)`` samples of ``sha``: all of them, or a reference's most
        recent) moved to the present along the fitted drift."""
        if not beta:
            return xs
        t = self.times.get(sha, [])
        ts = t[-len(xs) :] if len(xs) <= len(t) else t
        now = self.total
        return [x * math.exp(beta * (now - ti)) for x, ti in zip(xs, ts, strict=False)]

    def ensure(self, sha: str, n: int) -> list[float]:
        have = self.data.get(sha, [])
        if len(have) < n:
            with self._taking(sha, n - len(have), in_place=False):
                pass
            with self.lock:
                have = self.data[sha]
        return have


class CommitGraph:
    """good..bad as bitsets: ancestors-within-range of every commit, for O(1) set algebra."""

    def __init__(self, parents: dict[str, list[str]], no_ops: frozenset[str] = frozenset()) -> None:
        order = list(parents)  # newest first (topo order)
        self.index = {sha: i for i, sha in enumerate(order)}
        self.shas = order
        self.parents = parents
        self.anc: dict[str, int] = {}
        for sha in reversed(order):
            bits = 1 << self.index[sha]
            for p in parents[sha]:
                if p in self.index:
                    bits |= self.anc[p]
            self.anc[sha] = bits
        self.live = ~self.mask(s for s in order if s in no_ops)  # the commits that can be culprits

    def holds(self, sha: str, ancestor: str) -> bool:
        """Is ``ancestor`` ``sha`` itself or one of its ancestors within the range? (False for a
        commit outside it, such as the good end.)"""
        return sha in self.anc and ancestor in self.index and bool(self.anc[sha] >> self.index[ancestor] & 1)

    def members(self, bits: int) -> list[str]:
        return [s for s in self.shas if bits >> self.index[s] & 1]

    def mask(self, shas) -> int:
        return sum(1 << self.index[s] for s in shas)


def _llr(good: list[float], bad: list[float], c: list[float], clip: float) -> float:
    """Sum over c's samples of log f_bad(x) - log f_good(x), with f the Gaussian KDE of each
    reference (Silverman bandwidth, floored), each term clipped to +-``clip`` so that no single
    outlier can decide alone."""
    g, b, x = np.asarray(good), np.asarray(bad), np.asarray(c)[:, None]
    pooled = np.sqrt((np.var(g, ddof=1) + np.var(b, ddof=1)) / 2)
    floor = 1e-3 * abs(float(np.median(g))) or 1e-9

    def log_kde(ref: np.ndarray) -> np.ndarray:
        h = max(1.06 * pooled * ref.size**-0.2, floor)
        z = (x - ref[None, :]) / h
        return np.logaddexp.reduce(-0.5 * z * z, axis=1) - np.log(ref.size * h)

    return float(np.clip(log_kde(b) - log_kde(g), -clip, clip).sum())


def _llr_t(good: list[float], bad: list[float], c: list[float], clip: float, df: float = 4.0) -> float:
    """Sum over c's samples of log f_bad(x) - log f_good(x), each f a Student-t (heavy tails: an
    outlier moves the sum little) at the reference's median with the two references' pooled robust
    sd; each term clipped to +-``clip``."""
    g, b, x = np.asarray(good), np.asarray(bad), np.asarray(c)
    mg, mb = float(np.median(g)), float(np.median(b))
    sd = noise_sd(g, b) or 1e-3 * abs(mg) or 1e-9

    def logf(mu: float) -> np.ndarray:
        z = (x - mu) / sd
        return -(df + 1) / 2 * np.log1p(z * z / df)

    return float(np.clip(logf(mb) - logf(mg), -clip, clip).sum())


def _classify(good: list[float], bad: list[float], c: list[float], cfg: BisectConfig, at_cap: bool):
    """(verdict or None for 'more samples', p vs good, p vs bad, confident).

    Two paths decide; either may fire. (1) Wald's sequential probability-ratio test between the
    two references (is c drawn like good or like bad?), stopping at log(1/alpha). (2) Rank tests
    against each reference, which also cover a level between the two (several steps)."""
    g_med, b_med = float(np.median(good)), float(np.median(bad))
    change_pct = abs(b_med - g_med) / g_med * 100 if g_med else 0.0
    least = _least_step(cfg, change_pct)  # of the change: a level nearer good is good's side
    min_effect = least * change_pct
    span = b_med - g_med
    frac = (float(np.median(c)) - g_med) / span if span else 0.0  # 0 = at good, 1 = at bad
    vg = compare(good, c, alpha=cfg.alpha, beta=cfg.beta, min_effect_pct=min_effect, interval=False)
    vb = compare(bad, c, alpha=cfg.alpha, beta=cfg.beta, min_effect_pct=min_effect, interval=False)
    llr_of = _llr_t if cfg.llr_model == "t" else _llr
    llr = llr_of(good, bad, c, cfg.llr_clip)
    bound = float(np.log(1.0 / cfg.alpha))
    # The likelihood ratio assumes c looks like one of the two references; a level in between
    # (several steps) would fool it, so it may only conclude where a rank test agrees. Not where
    # each probe is one server launch (``launch_offsets``): there a probe's samples all carry its
    # launch's offset, and a rank test tells two launches of one level apart (the lab's uneven
    # steps: probes at a reference's level took 7 samples, not 3, before "good"); the level gate
    # (the smallest step that counts) stands in for it.
    consistency = 0.0 if cfg.launch_offsets else cfg.consistency_p
    sprt_bad = llr >= bound and vb.p_value >= consistency
    # A level in between is the bad side of the step searched for (a step at or before c) once c
    # is clearly off good by the smallest step that counts: a second ratio test, good against good
    # moved that far towards bad. Before, only the rank test against good could say so, and at
    # alpha 0.0015 it cannot before 6 or 7 samples whatever the gap: every probe between two
    # steps took 3 + 2 + 2 (the lab's uneven steps). Only where c lies half as far again (a step
    # near the size that stops counting, as astroid's 1.25x below its 4x re-land, stays the rank
    # tests' to decide) and that smallest step is three noise sds or more: within the noise the
    # test is not sure enough for its price (the hard bench's staircase, 10 % steps under 5 % CV:
    # both steps named in 73 % of 300 trials against 77 % without it, for 3 samples fewer).
    shift = least * span
    clear = abs(shift) >= 3 * noise_sd(np.asarray(good), np.asarray(bad))
    if not sprt_bad and frac >= 1.5 * least and clear:
        sprt_bad = llr_of(good, [x + shift for x in good], c, cfg.llr_clip) >= bound
    # ...and either may call it good only near good: a level a quarter or more of the way to bad is
    # a step (of several) that more samples must decide, however much closer to good than to bad.
    sprt_good = llr <= -bound and vg.p_value >= consistency and frac < least
    if (sprt_bad or vg.verdict == "different") and frac >= least:
        return "bad", vg.p_value, vb.p_value, True
    if (
        sprt_good
        or (vg.verdict == "same" and frac < least)  # "same" at a few samples is weak
        # Clearly not at bad and below the smallest step that counts: the good side of this step,
        # even when it differs from good (a smaller step elsewhere in the range: astroid's real
        # case sits 20 % above good under a 4x step, and no sample count ever made it "same").
        or (vb.verdict == "different" and frac < least)
    ):
        return "good", vg.p_value, vb.p_value, True
    if at_cap:
        return ("bad" if frac >= 0.5 else "good"), vg.p_value, vb.p_value, False
    return None, vg.p_value, vb.p_value, False


def _least_step(cfg: BisectConfig, change_pct: float) -> float:
    """The smallest step that counts, as a fraction of the good->bad change of ``change_pct``:
    ``min_effect_fraction`` of it, or, in a search above a culprit, of the whole change
    (``whole_change_pct``), at most a half (there the nearer end decides, as at the sample cap)."""
    if not cfg.whole_change_pct or change_pct <= 0:
        return cfg.min_effect_fraction
    return min(0.5, cfg.min_effect_fraction * max(1.0, cfg.whole_change_pct / change_pct))


def bisect(
    parents: dict[str, list[str]],
    good: str,
    bad: str,
    probe: Probe,
    cfg: BisectConfig | None = None,
    on_record: Callable[[ProbeRecord], None] | None = None,
    stop_on: tuple[type[BaseException], ...] = (),
) -> BisectResult:
    """Find the culprit(s) in ``parents`` (good..bad with parents, e.g. ``CliGit.rev_list``).

    Raises BisectError when good or bad cannot be measured; ``on_record`` sees each probe.
    ``stop_on``: exceptions of the probe that end the bisection as its sample budget does (a
    hunt's budget): the result keeps what was found, and ``stopped`` is the exception's text."""
    cfg = cfg or BisectConfig()
    samples = _Samples(_oriented(probe, cfg.higher_is_better), cfg.sandwich_samples)
    samples.ref_n = cfg.ref_samples
    samples.budget = cfg.max_total_samples
    found = _Found()
    try:
        _climb(parents, good, bad, samples, cfg, found, on_record)
    except (SampleBudgetSpent, *stop_on) as exc:
        found.stopped = str(exc)
        if found.pending is not None and not found.culprits:
            found.culprits.append(found.pending)  # the first step stands, unverified: good and bad differ
    culprits, rejected, records = found.culprits, found.rejected, found.records
    # A further step that a fresh A/B against its parent does not confirm is not reported as a
    # culprit (the first one stands, flagged unverified: good and bad are known to differ).
    rejected += [c for c in culprits[1:] if cfg.verify and not c.verified]
    culprits = [c for i, c in enumerate(culprits) if i == 0 or not cfg.verify or c.verified]
    rejected = [c for c in rejected if c.sha not in {k.sha for k in culprits}]
    decided = [r for r in records if r.verdict != "skip"]
    return BisectResult(
        culprits=culprits,
        rejected=rejected,
        probes=len({r.sha for r in records}),
        total_states=len(samples.data),
        samples=samples.total,
        verification_samples=samples.fresh_total,
        rounds=found.rounds,
        skipped=sorted(found.skipped),
        confidence=sum(r.confident for r in decided) / len(decided) if decided else 1.0,
        records=records,
        candidates=len(parents),
        stopped=found.stopped,
        last_search_from=found.search_from,
    )


@dataclass
class _Found:
    """What ``_climb`` has found so far: kept when a sample budget ends it midway."""

    culprits: list[Culprit] = field(default_factory=list)
    rejected: list[Culprit] = field(default_factory=list)
    records: list[ProbeRecord] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)
    rounds: int = 0
    search_from: int = 0  # where in ``records`` the current search began
    pending: Culprit | None = None  # found by a search, its sandwich not yet done
    stopped: str | None = None


def _climb(
    parents: dict[str, list[str]],
    good: str,
    bad: str,
    samples: _Samples,
    cfg: BisectConfig,
    found: _Found,
    on_record: Callable[[ProbeRecord], None] | None,
) -> None:
    """The searches of ``bisect``: the first step above good, then, while the bad end is worse than
    the last culprit's level by a step that counts, the next step above it."""
    culprits, rejected, records, skipped = found.culprits, found.rejected, found.records, found.skipped
    # Good first: a caller that just measured the known-good state often still has its server up.
    if cfg.known_ref_samples >= cfg.sandwich_samples:
        for ref, name in ((good, "good"), (bad, "bad")):
            _reference(samples, ref, name, cfg.known_ref_samples)
        if _clearly_apart(samples.data[good], samples.data[bad], cfg.clear_gap_sd):
            samples.ref_n = cfg.known_ref_samples
    for ref, name in ((good, "good"), (bad, "bad")):
        _reference(samples, ref, name, samples.ref_n)

    def above(good_ref: str) -> BisectConfig:
        """The config of a search: above a culprit, the smallest step that counts stays a quarter of
        the whole good->bad change, not of what is left above the culprit (a quarter of that may be
        an eighth of the whole: the lab's uneven_steps named a commit between its two steps whose
        one launch came 2.3 % low, 0.3 of the way from the first step's level to bad, and the hunt
        spent 5 launches refuting it; probes at the culprit's level had to come within an eighth
        of the whole change of it before they were called good)."""
        if good_ref == good:
            return cfg
        g, b = (float(np.median(samples.data[x])) for x in (good, bad))
        return cfg.model_copy(update={"whole_change_pct": abs(b - g) / abs(g) * 100 if g else None})

    good_ref = good
    remaining = dict(parents)
    retried = False
    for _ in range(2 * cfg.max_culprits):
        if len(culprits) >= cfg.max_culprits:
            break
        graph = CommitGraph(remaining, frozenset(cfg.no_ops))
        if bad not in graph.index:
            break
        search_cfg = above(good_ref)
        found.search_from = len(records)
        suspects, used_rounds = _search(
            graph, good_ref, bad, samples, search_cfg, records, skipped, found.rounds, on_record
        )
        found.rounds += used_rounds
        if suspects is None:
            break
        culprit = suspects[-1]  # with skipped neighbours, the known-bad one; all of them are suspects
        c = Culprit(
            sha=culprit,
            parent=(parents.get(culprit) or [None])[0],
            suspects=suspects,
            delta_pct=None,
            p_value=None,
            verified=False,
        )
        if cfg.verify:
            found.pending = c
            _sandwich(c, samples, 4 * cfg.sandwich_samples)  # its culprit samples also serve the step check
            found.pending = None
            if not c.verified and not retried:
                # The fresh A/B does not confirm it: a probe decision was probably wrong. Search
                # again; every probe is re-decided with all the samples it has now.
                retried = True
                rejected.append(c)
                continue
        retried = False
        culprits.append(c)
        if culprit == bad:
            break
        # Is there another step above this one? Compare the culprit's level with the bad end.
        if not _more_steps(samples, good, culprit, bad, cfg):
            break
        # It becomes the next search's good end: a reference's samples, or, where the ends were kept
        # at the size the caller held because they told the ends apart beyond doubt (a one-slot
        # host, where a top-up is minutes), the samples it has when they tell it from the bad end
        # beyond doubt too (the lab's uneven steps: 5 of them, not 10).
        have = samples.data.get(culprit, [])
        held = samples.ref_n < cfg.ref_samples and len(have) >= cfg.sandwich_samples
        as_is = held and _clearly_apart(have, samples.data[bad], cfg.clear_gap_sd)
        _reference(samples, culprit, "good", len(have) if as_is else cfg.ref_samples)
        good_ref = culprit
        keep = graph.anc[bad] & ~graph.anc[culprit]
        remaining = {s: parents[s] for s in graph.members(keep)}


class Stopped(BaseModel):
    """Where a bisection a budget stopped had got to (``where_stopped``)."""

    found: list[str]  # the steps it had named, oldest first
    commits: int  # in the range its last search covered: the whole range, or the part above the last step
    live: int  # of which not pruned (no-ops)
    left: list[str]  # the commits that search's decisions leave as suspects, newest first; [] when none decided


def where_stopped(parents: dict[str, list[str]], head: str, no_ops: list[str], res: BisectResult) -> Stopped:
    """What a stopped bisection had found and the range its last search had narrowed to. A search
    above a step judges its probes against that step's level, so only its own decisions narrow
    the range above the step (the whole range's decisions named eight commits that held neither
    step, and the step found was left unsaid)."""
    found = [c.sha for c in res.culprits]
    if found:
        graph = CommitGraph(parents, frozenset(no_ops))
        keep = graph.anc[head] & ~graph.anc[found[-1]]
        parents = {s: parents[s] for s in graph.members(keep)}
    records = res.records[res.last_search_from :] if found else res.records
    live = len(parents) - len(set(no_ops) & set(parents))
    left: list[str] = []
    if parents and head in parents:
        graph = CommitGraph(parents, frozenset(no_ops))
        cand, _bad = narrow(graph, graph.anc[head], [(r.sha, r.verdict) for r in records if r.sha in graph.index])
        left = graph.members(cand & graph.live)
    return Stopped(found=found, commits=len(parents), live=live, left=left if len(left) < live else [])


def _reference(samples: _Samples, ref: str, name: str, n: int, fresh: bool = False) -> list[float]:
    """``n`` samples of an end of the range (``fresh``: ``n`` new ones); every probe is judged
    against the ends, so one that cannot be measured, at the start or later, ends the bisection
    with that reason (a ``BisectError``), never as a probe's skip."""
    try:
        return samples.fresh(ref, n) if fresh else samples.ensure(ref, n)
    except ProbeError as exc:
        raise BisectError(f"the {name} reference {ref[:10]} cannot be measured: {exc}") from exc


def _clearly_apart(good: list[float], bad: list[float], gap_sd: float) -> bool:
    """Do the references' samples already separate the two ends beyond doubt (every probe is
    tested against them: their densities must be clear)? A significant rank test *and* medians
    ``gap_sd`` robust noise sds apart."""
    a, b = np.asarray(good, dtype=float), np.asarray(bad, dtype=float)
    sd = noise_sd(a, b)
    gap = abs(float(np.median(a)) - float(np.median(b)))
    return compare(a, b, alpha=0.01, interval=False).verdict == "different" and gap >= gap_sd * sd > 0


def _oriented(probe: Probe, higher_is_better: bool) -> Probe:
    if higher_is_better:
        return probe
    return lambda sha, n: [-x for x in probe(sha, n)]


def _more_steps(samples: _Samples, good: str, culprit: str, bad: str, cfg: BisectConfig) -> bool:
    """Is the bad end still worse than the culprit's level by a step that counts (another step
    above it)?

    A lenient rank test (p <= 0.01) on the culprit's samples (those it has, grown to
    ``step_check_samples`` while the test is undecided), and a gap of at least half of
    ``min_effect_fraction`` of the whole good->bad change (the size below which no probe's step
    counts; half, because the culprit's samples and the bad end's were taken at different times
    and a drifting machine moves one against the other: at the full fraction the hard bench's
    staircase lost its second step in 5 of 100 trials). Without it, a few percent of drift
    started a search between two ends at one level, where every probe is ambiguous and grows to
    dozens of samples (100 s of a real case's hunt). A false "yes" costs only that search:
    every further culprit must pass its own sandwich."""
    cap = max(cfg.step_check_samples, 3)
    while True:
        a = samples.data.get(culprit, [])
        b = _reference(samples, bad, "bad", max(len(a), samples.ref_n))
        g = samples.data.get(good, [])
        if len(a) < 3 or not g:
            return False
        g_med, a_med, b_med = (float(np.median(x)) for x in (g, a, b))
        if a_med - b_med < cfg.min_effect_fraction / 2 * (g_med - b_med):
            return False
        c = compare(a, b, alpha=0.01, interval=False)
        if c.verdict == "different" or len(a) >= cap:
            return c.verdict == "different" and b_med < a_med
        try:  # undecided: the culprit's level is measured further (the bad end grows beside it)
            samples.ensure(culprit, min(cap, len(a) + max(cfg.step_samples, int(len(a) * cfg.step_growth))))
        except ProbeError:
            return False


def _search(
    graph: CommitGraph,
    good: str,
    bad: str,
    samples: _Samples,
    cfg: BisectConfig,
    records: list[ProbeRecord],
    skipped: set[str],
    round0: int,
    on_record: Callable[[ProbeRecord], None] | None = None,
) -> tuple[list[str] | None, int]:
    cand = graph.anc[bad]  # the culprit is bad or one of its ancestors in range
    known_bad = {bad}
    _reference(samples, good, "good", samples.ref_n)
    _reference(samples, bad, "bad", samples.ref_n)
    rounds = 0
    with ThreadPoolExecutor(max_workers=max(1, cfg.k)) as pool:
        while True:
            picks = _pick(graph, cand, known_bad | skipped, cfg.k)
            if not picks:
                break
            rounds += 1
            results = list(pool.map(lambda s: _decide(s, good, bad, samples, cfg), picks))
            for sha, (verdict, n, p_g, p_b, confident) in zip(picks, results, strict=True):
                med = float(np.median(samples.data[sha])) if samples.data.get(sha) else None
                if cfg.higher_is_better is False and med is not None:
                    med = -med
                rec = ProbeRecord(
                    sha=sha,
                    verdict=verdict,
                    samples=n,
                    median=med,
                    p_vs_good=p_g,
                    p_vs_bad=p_b,
                    confident=confident,
                    round=round0 + rounds,
                )
                records.append(rec)
                if on_record is not None:
                    on_record(rec)
            decided = [(sha, verdict) for sha, (verdict, *_rest) in zip(picks, results, strict=True)]
            skipped.update(sha for sha, verdict in decided if verdict == "skip")
            cand, bad_now = narrow(graph, cand, decided)
            known_bad.update(bad_now)
    # No-op commits stay in the graph (the step may sit below one) but are never the culprit,
    # unless nothing else is left (then the pruning was wrong: say all of them).
    members = graph.members(cand & graph.live) or graph.members(cand)
    if not members:
        return None, rounds
    # One member: the culprit. More: skipped commits border the oldest known-bad one, and any of
    # them may be the first bad commit; report them all (oldest first), never the last one alone.
    return list(reversed(members)), rounds


def narrow(graph: CommitGraph, cand: int, decided: list[tuple[str, str]]) -> tuple[int, list[str]]:
    """The candidates left once ``decided`` ((sha, "good" / "bad" / "skip")) is applied: good
    verdicts first (they only remove: the commit and its ancestors), then bad ones (they only
    intersect: the commit's ancestors), a bad commit no longer a candidate left out. Returns the
    candidates and the bad commits applied. Commits outside the graph are ignored."""
    for sha, verdict in decided:
        if verdict == "good" and sha in graph.index:
            cand &= ~graph.anc[sha]
    applied = []
    for sha, verdict in decided:
        if verdict == "bad" and sha in graph.index and cand >> graph.index[sha] & 1:
            cand &= graph.anc[sha]
            applied.append(sha)
    return cand, applied


def _pick(graph: CommitGraph, cand: int, exclude: set[str], k: int) -> list[str]:
    """Up to k commits whose ancestor counts split the candidates most evenly into k+1 parts.
    No-op commits are neither picked nor counted: they cannot be the culprit."""
    cand &= graph.live
    total = cand.bit_count()
    if total <= 1:
        return []
    scored = []
    for sha in graph.members(cand):
        if sha in exclude:
            continue
        a = (graph.anc[sha] & cand).bit_count()
        if a < total:  # the top candidate splits nothing: it is known bad
            scored.append((a, sha))
    if not scored:
        return []
    picks: list[str] = []
    for i in range(1, k + 1):
        target = total * i / (k + 1)
        best = min((s for s in scored if s[1] not in picks), key=lambda s: (abs(s[0] - target), s[1]), default=None)
        if best is not None:
            picks.append(best[1])
    return picks


def _decide(sha: str, good: str, bad: str, samples: _Samples, cfg: BisectConfig):
    n = cfg.initial_samples
    for ref, name in ((good, "good"), (bad, "bad")) if cfg.ref_refresh else ():
        _reference(samples, ref, name, cfg.ref_refresh, fresh=True)  # beside the probe: their level now
    while True:
        try:
            c = samples.ensure(sha, n)
        except ProbeError:
            return "skip", len(samples.data.get(sha, [])), None, None, True
        # The references grow with the probe once it outgrows them (rank tests stay balanced).
        have = min(len(samples.data.get(good, [])), len(samples.data.get(bad, [])))
        w = max(samples.ref_n, n) if n <= have else min(max(n, math.ceil(have * cfg.ref_growth)), cfg.max_samples)
        g = _reference(samples, good, "good", w)
        b = _reference(samples, bad, "bad", w)
        if cfg.ref_refresh:  # only their latest: the older ones were taken at another level
            g, b = g[-w:], b[-w:]
        if cfg.detrend:
            beta = samples.drift()
            g, b, c = samples.at_now(good, g, beta), samples.at_now(bad, b, beta), samples.at_now(sha, c, beta)
        verdict, p_g, p_b, confident = _classify(g, b, c, cfg, at_cap=n >= cfg.max_samples)
        if verdict is not None:
            return verdict, len(c), p_g, p_b, confident
        n = min(n + max(cfg.step_samples, int(n * cfg.step_growth)), cfg.max_samples)


def _sandwich(c: Culprit, samples: _Samples, max_n: int) -> None:
    """Re-measure the culprit and its parent afresh (new samples) and compare them, growing the
    samples (doubling, up to ``max_n`` per side) while the answer is unknown."""
    if c.parent is None:
        return
    parent: list[float] = []
    culprit: list[float] = []
    n = samples.sandwich_n
    try:
        while True:
            parent += samples.fresh(c.parent, n - len(parent))
            culprit += samples.fresh(c.sha, n - len(culprit))
            # Samples are oriented (higher is better): a regression is a lower culprit median.
            cmp = compare(parent, culprit, alpha=0.01, interval=False)
            if cmp.verdict == "different" or n >= max_n:
                break
            n = min(2 * n, max_n)
    except ProbeError:
        return
    c.delta_pct = cmp.delta_pct
    c.p_value = cmp.p_value
    c.verified = cmp.verdict == "different" and float(np.median(culprit)) < float(np.median(parent))


def log2_bound(n: int) -> int:
    """The lower bound on probes for n suspects: ceil(log2(n + 1))."""
    return math.ceil(math.log2(n + 1))


class BreakResult(BaseModel):
    """The first commit of ``good..bad`` that does not serve (a crash or a hang is deterministic:
    one probe per commit decides), with the commits that could not be built or tested."""

    culprit: str | None
    suspects: list[str]  # == [culprit] when exact; more when skipped commits border it
    probes: int
    skipped: list[str]
    serving: list[str]
    broken: list[str]


def bisect_broken(
    parents: dict[str, list[str]], good: str, bad: str, serves: Callable[[str], bool | None]
) -> BreakResult:
    """Find the first commit after which the server no longer serves. ``serves(sha)`` answers True
    (it serves), False (it does not start, crashes or hangs) or None (untestable: it does not
    build; skipped and left a suspect, as ``git bisect skip`` does). The midpoint rule over the
    whole graph, as in ``bisect``."""
    graph = CommitGraph(parents)
    cand = graph.anc[bad]
    known_bad, skipped, serving, broken = {bad}, set(), [], []
    while True:
        picks = _pick(graph, cand, known_bad | skipped, 1)
        if not picks:
            break
        sha = picks[0]
        answer = serves(sha)
        if answer is None:
            skipped.add(sha)
        elif answer:
            serving.append(sha)
            cand &= ~graph.anc[sha]
        else:
            broken.append(sha)
            known_bad.add(sha)
            cand &= graph.anc[sha]
    members = list(reversed(graph.members(cand)))
    return BreakResult(
        culprit=members[-1] if members else None,
        suspects=members,
        probes=len(serving) + len(broken) + len(skipped),
        skipped=sorted(skipped),
        serving=serving,
        broken=broken,
    )
