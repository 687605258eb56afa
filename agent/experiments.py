"""The experiments every hypothesis category runs: A/Bs taken together, their verdicts and words.

An A/B decides on samples of both sides taken in one experiment (``ab``; a confirmation on
servers launched for it, ``fresh_ab``); ``explains`` says whether its difference could explain
the regression; ``halving_step`` is one step of a localization by halving (patches, packages);
``set_verdict`` writes a verdict on a group of hypotheses; ``record_confirmation`` keeps a
confirmation's outcome on the hunt.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from agent.runtime import Runtime
from agent.state import Hunt, Hypothesis, Measured
from tools.stats import compare_launches, shortfall_p, split_launches


def is_better(hunt: Hunt, a: Measured, b: Measured) -> bool:
    """Is a better than b in the metric's direction?"""
    return (a.median > b.median) == hunt.target.higher_is_better


def explains(hunt: Hunt, cmp, fast: Measured, slow: Measured) -> bool:
    """Does the A/B show a difference that could explain the regression: significant, in the
    right direction, and at least the smallest effect that matters? A significant 4 % step
    cannot explain a 21 % drop; with a noisy neighbour such steps are common."""
    return cmp.verdict == "different" and _could_explain(hunt, cmp, fast, slow)


def _could_explain(hunt: Hunt, cmp, fast: Measured, slow: Measured, least: float | None = None) -> bool:
    """The A/B's estimate, whatever its significance: the right way, and at least the smallest
    effect that matters (``least``, in percent, where the caller knows it better)."""
    return is_better(hunt, fast, slow) and abs(cmp.delta_pct) >= (least or min_effect_pct(hunt))


def verdict_of(hunt: Hunt, cmp, fast: Measured, slow: Measured, least: float | None = None) -> str:
    """A hypothesis' status from its A/B: ``supported`` when it explains the regression
    (``explains``); ``inconclusive`` when it stayed unknown after all its rounds while its
    estimate, in the right direction, is at least the smallest effect that matters and its
    one-sided test does not rule such a gain out (noise too high for the samples: a refutation
    there would send the hunt on to "the known-good commit measures like HEAD" on no evidence);
    otherwise ``refuted`` (the same, the wrong way, too small by its estimate, or ruled out).
    ``least``: the smallest effect, in percent, in place of ``min_effect_pct``."""
    if cmp.verdict == "different" and _could_explain(hunt, cmp, fast, slow, least):
        return "supported"
    if cmp.verdict == "unknown" and _could_explain(hunt, cmp, fast, slow, least) and not ruled_out(cmp):
        return "inconclusive"
    return "refuted"


def under_said(hunt: Hunt, cmp, fast: Measured, slow: Measured, least: float | None = None) -> str:
    """What a refutation adds when its A/B did find a difference, the right way, but one smaller
    than what is hunted: "+2.7%, p=0.0043, different" beside "refuted" read as a contradiction."""
    bound = least or min_effect_pct(hunt)
    if cmp.verdict != "different" or not is_better(hunt, fast, slow) or abs(cmp.delta_pct) >= bound:
        return ""
    return f"; under the {bound:.2g}% a cause must show"


MIN_DROP_PCT = 3.0  # a reproduced drop smaller than this (the median's, against the alert's good value) is not hunted


def min_effect_pct(hunt: Hunt) -> float:
    """The smallest effect that can explain a part of the drop: a quarter of it (at least 2 %), or
    5 % while its size is unknown. In percent of the drop's larger end, so that it holds from
    either side of an A/B: a lower-is-better metric 380x slower (0.014 -> 5.3 ms) has a quarter
    of +38000 % from its good end, which no revert measured from HEAD's side (-99.7 %) can show."""
    ends = drop_ends(hunt)
    if ends is None:
        return 5.0
    good, bad = ends
    return max(2.0, 0.25 * abs(good - bad) / max(abs(good), abs(bad)) * 100)


def drop_ends(hunt: Hunt) -> tuple[float, float] | None:
    """The drop's two ends: the alert's good and bad values (the good value alone: with the
    reproduction's median as the bad end); without them (a ``--bench`` hunt given only a
    known-good ref), the supported history A/B's medians (good-candidate, HEAD), once measured.
    Without this a 5 % floor judged every further step of an 80x drop: a commit measured a few
    percent slower under load could be named beside the real culprit."""
    t = hunt.target
    if t.good_value and t.bad_value:
        return t.good_value, t.bad_value
    if t.good_value and hunt.regression.get("bad") is not None:
        # Only the good value given (`--good-value`): the reproduction measured the bad end. A trial's
        # 88 % drop judged each A/B by the 5 % of a drop of unknown size, and an A/B of two states
        # both far below good (60 vs 62) grew to 48 samples a side before it could rule that out.
        return t.good_value, hunt.regression["bad"]
    ab = history_ab(hunt)
    if ab is None:
        return None
    good, head = ab[0].median, ab[1].median
    return (good, head) if good else None


def history_ab(hunt: Hunt) -> tuple[Measured, Measured] | None:
    """The supported history A/B's two measurements (good-candidate, HEAD), once measured."""
    h = next((h for h in hunt.hypotheses if h.category == "history" and h.status == "supported"), None)
    if h is None or len(h.evidence) < 2:
        return None
    try:
        return hunt.get(h.evidence[0]), hunt.get(h.evidence[1])
    except StopIteration:
        return None


def ab(
    hunt: Hunt,
    rt: Runtime,
    a: Measured,
    b: Measured,
    label_a: str,
    label_b: str,
    alpha: float = 0.01,
    better: str | None = None,
    n: int | None = None,
    first: bool = False,
):
    """Compare two states on samples taken together: ``n`` (``Runtime.ab_samples``: the budget's
    samples per state, at least 6, more where a launch is expensive) new samples of each,
    interleaved on two warm servers or in balanced launches on a one-slot host (the first on a
    server still up from the step before, if either side has one). Samples either side got earlier
    (the reproduction, another A/B, the bisection) are not used: taken at another time, under
    another load, they make drift look like a difference (two warm servers measured one after the
    other under a neighbour's changing load differed by 9 % on a change that does nothing). While
    unknown, more fresh rounds (as many again, then twice as many), joined to the first. One of many
    tests of the same question passes a smaller ``alpha`` (Bonferroni). ``a`` and ``b`` may be
    measured states or ``Runtime.planned`` ones.

    ``better`` ("a" or "b"): the side that must be better for the hypothesis under test to
    explain the regression. Then an unknown answer whose one-sided test already rules out a gain
    of the smallest effect that matters stops there (``p_shortfall`` <= alpha): more samples, a
    launch or more on a one-slot host, could only make a difference too small to matter
    significant. "either": no side is named (a model's compare); the test is on the side that
    measures better so far (the other one is further still from such a gain).

    ``first``: ``a`` and ``b`` are already measured, together, in one experiment (``three_arms``):
    that is the first round."""
    n = n or rt.ab_samples(hunt, alpha)
    if not first:
        a, b = rt.measure_pair(hunt, a, b, n, fresh=True)
    cmp = _ab_round(hunt, a, b, alpha, better)
    for more in further_rounds(hunt, n):
        if cmp.verdict != "unknown" or ruled_out(cmp):
            break
        more_a, more_b = rt.measure_pair(hunt, a, b, more, fresh=True)
        a, b = rt.joined(hunt, a, more_a), rt.joined(hunt, b, more_b)
        cmp = _ab_round(hunt, a, b, alpha, better)
    return _stopped(hunt, cmp, a, b), a, b


# A benchmark command's sample is its own process (no launch, no server to keep warm): an A/B still
# unknown keeps taking rounds, each as large as all before, up to this many samples a side. A 1.2x
# change under +-25 % noise per sample needs about 40 a side at p <= 0.01.
BENCH_AB_MAX_SAMPLES = 160


def further_rounds(hunt: Hunt, n: int) -> list[int]:
    """The sizes of the rounds an A/B takes after its first while the answer is unknown. Where
    a side is a server launch: as many again, then twice as many (a round is a launch or three on a
    one-slot host). A benchmark command: doubling until ``BENCH_AB_MAX_SAMPLES`` a side."""
    if not hunt.target.command:
        return [n, 2 * n]
    sizes, total = [], n
    while total < BENCH_AB_MAX_SAMPLES:
        sizes.append(min(total, BENCH_AB_MAX_SAMPLES - total))
        total += sizes[-1]
    return sizes


def _stopped(hunt: Hunt, cmp, a: Measured, b: Measured):
    """An answer still unknown says which budget stopped it."""
    if cmp.verdict == "unknown" and not ruled_out(cmp):
        cap = (
            f"the A/B's cap of {BENCH_AB_MAX_SAMPLES} samples a side"
            if hunt.target.command
            else "the A/B's three rounds (each a launch or more a side)"
        )
        cmp.stopped = f"still unknown after {len(a.samples)} + {len(b.samples)} samples: {cap}"
    return cmp


def _ab_round(hunt: Hunt, a: Measured, b: Measured, alpha: float, better: str | None):
    cmp = launch_aware(hunt, a, b, alpha)
    if better == "either":
        better = "a" if is_better(hunt, a, b) else "b"
    if better is not None:
        fast, slow = (a, b) if better == "a" else (b, a)
        cmp.p_shortfall = shortfall_p(
            fast.samples, fast.groups, slow.samples, slow.groups, min_effect_pct(hunt), hunt.target.higher_is_better
        )
    return cmp


def ruled_out(cmp) -> bool:
    """Did the one-sided test rule out a gain large enough to explain the regression?"""
    return cmp.verdict == "unknown" and cmp.p_shortfall is not None and cmp.p_shortfall <= cmp.alpha


def launch_aware(hunt: Hunt, a: Measured, b: Measured, alpha: float = 0.01, context: bool = False):
    """Compare two measured states, counting samples of one launch as correlated; ``context``:
    with the launch-to-launch spread of the hunt's earlier states too (``launch_context``)."""
    return compare_launches(
        a.samples,
        a.groups,
        b.samples,
        b.groups,
        context=launch_context(hunt, exclude=(a.id, b.id)) if context else None,
        alpha=alpha,
        min_effect_pct=min_effect_pct(hunt),
        interval=False,
    )


def launch_context(hunt: Hunt, exclude: tuple[str, ...] = ()) -> list[list[list[float]]]:
    """The samples by launch of every state the hunt measured on two launches or more, each state
    once (its measurement with the most samples: a later round joined to an earlier one holds
    both), for the launch-to-launch spread of this host."""
    best: dict[tuple, Measured] = {}
    for m in hunt.measurements:
        if m.id in exclude or len([g for g in m.groups if g]) < 2:
            continue
        key = (m.ref, m.launch, tuple(sorted(m.env.items())))
        if key not in best or len(m.samples) > len(best[key].samples):
            best[key] = m
    return [split_launches(m.samples, m.groups) for m in best.values()]


def fresh_ab(
    hunt: Hunt,
    rt: Runtime,
    a: tuple[str, str] | Measured,
    b: tuple[str, str] | Measured,
    n: int,
    known_a: Measured | None = None,
):
    """A confirmation: a fresh A/B of a against b (each a (label, ref), or a state measured
    before: its env and launch too, none of its samples) on servers launched for it, ``n``
    new samples each (at least 6: 5 + 5 is the fewest with which a rank test can reach p <= 0.01
    at all, and only with independent samples; in launches of two or three they count for less,
    and 6 + 6 still reaches it at a design effect up to 1.4), never samples from the bisection
    or the ledger's tests; while the answer is unknown, more fresh rounds, as ``ab``.

    Where launches are dear (``Runtime.dear_launches``: one slot, a launch worth three samples or
    more) the first round is one launch per side, A then B, judged with the launch-to-launch
    spread measured over the whole hunt (``launch_context``: the two launches alone cannot tell a
    launch's offset from the change); an unknown answer takes B then A next, so the two rounds
    together are the balanced A B B A. One launch fewer than A B A, which measured that spread
    from one repeated launch (one degree of freedom) and leaned on a prior for the rest.

    ``known_a``: a's side as measured fresh moments ago by the confirmation before this one (HEAD,
    when several steps of one range are each confirmed by their own revert). Where launches are
    dear and it holds ``n`` samples, only b is launched: the confirmations together are one
    experiment of one launch per state (HEAD, HEAD+revert1, HEAD+revert2), judged as each A/B is
    (the hunt's launch-to-launch spread), instead of a HEAD launch per culprit."""
    n = max(n, rt.ab_samples(hunt))
    single = rt.dear_launches(hunt)
    if single and known_a is not None and len(known_a.samples) >= n:
        ma = known_a
        mb = rt.measure_planned(hunt, b if isinstance(b, Measured) else rt.planned(hunt, *b), n, fresh=True)
    else:
        ma, mb = rt.fresh_pair(hunt, a, b, n, single=single)
    cmp = launch_aware(hunt, ma, mb, context=single)
    for i, more in enumerate(further_rounds(hunt, n)):
        if cmp.verdict != "unknown":
            break
        if single and i == 0:  # B A after A B: the two rounds together are balanced (A B B A)
            more_b, more_a = rt.measure_pair(hunt, mb, ma, more, fresh=True, relaunch=True, single=True)
        else:
            more_a, more_b = rt.measure_pair(hunt, ma, mb, more, fresh=True, relaunch=True)
        ma, mb = rt.joined(hunt, ma, more_a), rt.joined(hunt, mb, more_b)
        cmp = launch_aware(hunt, ma, mb, context=single)
    return _stopped(hunt, cmp, ma, mb), ma, mb


def fmt(cmp, a: Measured, b: Measured, metric: str) -> str:
    text = (
        f"{a.label} {a.median:.4g} vs {b.label} {b.median:.4g} {metric} ({cmp.delta_pct:+.1f}%, "
        f"p={cmp.p_value:.2g}, {cmp.verdict}"
    )
    if ruled_out(cmp):
        text += f"; a gain that could explain the drop ruled out, p={cmp.p_shortfall:.2g}"
    elif cmp.stopped:
        text += f"; {cmp.stopped}"
    return text + ")"


def freshness(a: Measured, b: Measured) -> str:
    launches = len(a.groups) + len(b.groups) if a.launch else 0  # a benchmark command launches nothing
    return f"; fresh: {len(a.samples)} + {len(b.samples)} new samples" + (
        f" in {launches} launches" if launches else ""
    )


def set_verdict(group: list[Hypothesis], status, reason: str, evidence: list[str]) -> None:
    for g in group:
        g.status = status
        g.reason = f"{reason}; {g.reason}" if g.reason and status != "supported" else reason
        g.evidence = evidence
        if status == "refuted" and "not on the executed path" in g.reason:
            g.status = "demoted"


def halving_step(hunt: Hunt, rt: Runtime, base: Measured, m: Measured, base_label: str, full: float):
    """One step of a localization by halving: A/B ``base`` vs ``m`` (the state with half of the
    suspects changed). The half holds the culprit when ``m`` differs measurably from ``base`` and
    moved at least half of ``full`` (the signed change of all suspects together, from ``base``):
    a 2 % wobble is not the 24 % being hunted. Returns (holds it, base, m, the A/B in words)."""
    cmp, base, m = ab(hunt, rt, base, m, base_label, m.label)
    share = (m.median - base.median) / full if full else 0.0
    # share >= 0.5 > 0 also means m moved from base the way all the suspects together did (the
    # callers' ``full`` comes from an A/B that explained the drop, so its sign is the right one).
    moved = cmp.verdict == "different" and share >= 0.5
    return moved, base, m, fmt(cmp, base, m, hunt.target.metric)


def one_launch_step(hunt: Hunt, rt: Runtime, base: Measured, top: Measured, m: Measured, full: float):
    """A halving step where launches are dear (``Runtime.dear_launches``): the half's state on one
    launch, placed between the two ends the group's own A/B has just measured (``base``: nothing
    changed; ``top``: all of it). It holds the culprit when it differs from ``base`` and lies past
    half the way to ``top``; it does not when it differs from ``top`` and lies short of half; each
    judged with the host's launch-to-launch spread (``launch_aware`` in context). Otherwise, and
    only then, the A/B of ``halving_step``. Before this every step was a fresh A/B of two or three
    launches: a patch of eight files took 18 launches to name one on a one-slot node. Returns what
    ``halving_step`` does, or None where the launch left it undecided (``m`` then measured)."""
    m = rt.measure_planned(hunt, m, rt.ab_samples(hunt)) if not m.samples else m
    share = (m.median - base.median) / full if full else 0.0
    near = top if share < 0.5 else base  # the end it must be told apart from
    cmp = launch_aware(hunt, near, m, context=True)
    if cmp.verdict != "different":
        return m, None
    moved = share >= 0.5
    said = f"{fmt(cmp, near, m, hunt.target.metric)}; {share * 100:.0f}% of the way from {base.label} to {top.label}"
    return m, (moved, base, m, said)


def halve(
    hunt: Hunt,
    rt: Runtime,
    suspects: list[Hypothesis],
    base: Measured,
    base_label: str,
    full: float,
    state_for: Callable[[list[Hypothesis]], Measured | None],
    words: Callable[[list[Hypothesis], bool, str], str],
    top: Measured | None = None,
) -> tuple[list[Hypothesis], Measured, Measured | None]:
    """A localization by halving (patches, packages): ``state_for(half)`` is the state with only
    that half changed (None: it cannot be made, stop), each ``halving_step`` keeps the half that
    moved, the other half is refuted with ``words(half, moved, numbers)``. Returns (the suspects
    left, the base as last measured, the last half's state when that half was the one left alone).
    ``top``: the state with every suspect changed, measured with ``base``: where launches are dear
    a step is first one launch of the half placed between the two (``one_launch_step``)."""
    alone: Measured | None = None
    dear = top is not None and rt.dear_launches(hunt)
    while len(suspects) > 1:
        half, rest = suspects[: len(suspects) // 2], suspects[len(suspects) // 2 :]
        m = state_for(half)
        if m is None:
            break
        step = None
        if dear:
            m, step = one_launch_step(hunt, rt, base, top, m, full)  # type: ignore[arg-type]
        moved, base, m, numbers = step or halving_step(hunt, rt, base, m, base_label, full)
        cleared, suspects = (rest, half) if moved else (half, rest)
        why = words(half, moved, numbers)
        for x in cleared:
            x.status, x.reason, x.evidence = "refuted", why, [base.id, m.id]
        alone = m if len(half) == 1 and suspects == half else None
    return suspects, base, alone


def conflicts_said(plan) -> str:
    """Why a prepared revert could not be used: the tool's error, or the files it conflicts in (the
    first four, then how many more: a 74-file cleanup's revert listed ten)."""
    if plan.error:
        return plan.error
    return f"the revert conflicts in {files_said(plan.result['conflicting_files'])}"


def files_said(files: list[str]) -> str:
    """The first four files, then how many more."""
    return ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")


def record_confirmation(hunt: Hunt, rt: Runtime, ok: bool, cmp, text: str, evidence: list[str], **extra) -> bool:
    """Keep a confirmation A/B's outcome on the hunt and say it."""
    hunt.regression["p_value"] = cmp.p_value
    return record_outcome(hunt, rt, ok, text, evidence, p_value=cmp.p_value, delta_pct=cmp.delta_pct, **extra)


def record_outcome(hunt: Hunt, rt: Runtime, ok: bool, text: str, evidence: list[str], **extra) -> bool:
    """Keep a confirmation's outcome (an A/B, or "does it serve") on the hunt and say it."""
    hunt.confirmation = {"ok": ok, "text": text, **extra, "evidence": evidence}
    rt.say(hunt, "confirm", ("confirmed: " if ok else "NOT confirmed: ") + text)
    return ok


# Words a launch's last command may start with before its program: a variable set for it, or a
# runner that takes the program after it.
_RUNNERS = {"exec", "env", "nohup", "setsid", "time"}
_PYTHON = re.compile(r"python[0-9.]*$")


def _runs_with(hunt: Hunt) -> str:
    """What starts the measured code: the server's launch, or the benchmark command."""
    return hunt.target.launch or hunt.target.command or ""


def launch_python(hunt: Hunt) -> str:
    """The Python the launch runs its server with, where its last command names one
    (``PYTHONPATH={worktree} exec ~/venv/bin/python -m mlx_lm.server``), else ``python3`` (after
    the setup part, e.g. a venv activated): what the package snapshot and a package's old
    versions must be read and unpacked with. A trial's snapshot read the host's python3, which
    had neither of the server's packages, and said "no evidence of a package change". A
    benchmark command (``--bench '~/proj/.venv/bin/python bench.py'``) names it the same way: its
    snapshot had read the host's python3 too (a trial's project venv, invisible)."""
    last = _runs_with(hunt).split(" && ")[-1]
    try:
        words = shlex.split(last)
    except ValueError:
        return "python3"
    for word in words:
        if re.fullmatch(r"[A-Za-z_]\w*=.*", word) or word in _RUNNERS:
            continue
        if _PYTHON.match(word.rsplit("/", 1)[-1]) and "{" not in word:
            # As the launch wrote it where a shell expands it (``~/venv``, ``$HOME/venv``).
            return word if re.fullmatch(r"[\w@%+=:,./~$-]+", word) else shlex.quote(word)
        break
    return "python3"


def setup_prefix(hunt: Hunt) -> str:
    """The launch template's setup part (everything before its last ``&&``), ready to prepend."""
    parts = hunt.target.launch.split(" && ")
    prefix = " && ".join(parts[:-1]).replace("{worktree}", shlex.quote(hunt.target.repo)).replace("{port}", "0")
    return f"{prefix} && " if prefix else ""
