"""How strong a verdict's evidence is, and what shape the drop has: read off a finished hunt.

- **Strength.** A cause is ``proven`` when a fresh A/B decided it (the confirmation, or for an
  environment variable, a patch, a package or a flag its own A/B, which is its proof), ``observed``
  when a reading is the evidence (hardware), ``likely`` when it was only named (a bisection whose
  confirmation did not run, or could not: neither the revert nor the culprit's parent builds).
  The deciding p-value is corrected for the number of A/B tests the hunt made (Bonferroni: p x
  tests, at most 1): a hunt that tries twenty things finds one at p = 0.05 by chance, so the
  report says how many were tried.
- **Shape.** A bisection assumes one step. The levels of the commits it probed say whether that
  held: a probed level between good and HEAD (beyond a quarter of the drop from both) means the
  drop came in steps. Each named culprit gets its step (the level after it against the level
  before it, as a share of the whole drop; a level is the probe beside the culprit pooled with the
  probes beyond it, up to a neighbouring culprit, that its samples cannot tell apart from it); the
  shape is ``one step``, ``steps`` (several, one of them carrying most of the drop) or ``gradual``
  (no single commit carries half of it).
"""

from __future__ import annotations

from statistics import median

import numpy as np

from agent.state import Hunt
from tools.stats import compare, noise_sd

DECIDES = ("environment", "uncommitted", "dependencies", "config")


def tests_made(hunt: Hunt) -> int:
    """A/B tests the hunt decided on: each hypothesis group tested by an A/B (its evidence names
    measurements), and the confirmation."""
    groups = {(h.category, tuple(h.evidence)) for h in hunt.hypotheses if h.evidence}
    return max(1, len(groups) + (1 if hunt.confirmation.get("p_value") is not None else 0))


def strength(hunt: Hunt) -> dict | None:
    """The root cause's evidence: ``proven`` / ``observed`` / ``likely``, its p-value and the
    p-value corrected for the tests made (None when there is no named cause)."""
    kind = hunt.root_kind
    if kind in (None, "none", "external"):
        return None
    n = tests_made(hunt)
    p = hunt.confirmation.get("p_value")
    if kind == "hardware":
        level = "observed"
    elif hunt.confirmation.get("ok") and not hunt.confirmation.get("untestable"):
        level = "proven"
    elif kind in ("env", "uncommitted", "dependency", "config", "multiple") and any(
        h.status == "supported" and h.category in DECIDES for h in hunt.hypotheses
    ):
        level = "proven"  # its own A/B decided it (taken together, fresh)
    else:
        level = "likely"
    return {
        "evidence": level,
        "p_value": p,
        "p_corrected": min(1.0, p * n) if p is not None else None,
        "tests": n,
    }


def steps(hunt: Hunt) -> dict | None:
    """The drop's shape over the bisected range (None without a bisection): the probed levels in
    history order, each culprit's step and share of the drop, and ``one step`` / ``steps`` /
    ``gradual``."""
    order = [hunt.good_candidate, *hunt.bisected] if hunt.good_candidate else list(hunt.bisected)
    if len(order) < 2 or not hunt.culprits:
        return None
    level: dict[str, float] = {}
    drawn: dict[str, list[float]] = {}
    for m in hunt.measurements:
        if m.ref in order and m.env == hunt.probe_env and m.samples:  # as the bisection probed them
            level[m.ref] = median(m.samples)
            drawn[m.ref] = m.samples
    probed = [(i, sha, level[sha]) for i, sha in enumerate(order) if sha in level]
    if len(probed) < 2:
        return None
    good, head = probed[0][2], probed[-1][2]
    drop = head - good
    ends = drawn[probed[0][1]], drawn[probed[-1][1]]
    if drop == 0 or (drop > 0) == hunt.target.higher_is_better:
        # The ends as the bisection probed them show no drop, or a gain (a machine whose speed
        # changed during the hunt): a step's share of that is no share (a trial's "+82.4 % (-522 %
        # of the drop)").
        return None
    intermediate = [  # a level between the ends, beyond a quarter of the drop from both, and told
        sha  # apart from both by its samples (a noisy probe's median alone is no level)
        for _, sha, v in probed[1:-1]
        if 0.25 < (v - good) / drop < 0.75 and all(_differ(end, drawn[sha]) for end in ends)
    ]
    found = []
    at_culprits = sorted(order.index(sha) for sha in hunt.culprits if sha in order)
    for sha in hunt.culprits:
        if sha not in order:
            continue
        at = order.index(sha)
        # Each side's level: the probe beside the culprit, pooled with the probes beyond it (up to
        # the neighbouring culprit) that its samples cannot tell apart from it. Alone, a 3-sample
        # probe under load put a +29 % step at +88.6 %, "270 % of the drop".
        since = max((i for i in at_culprits if i < at), default=-1)
        until = min((i for i in at_culprits if i > at), default=len(order))
        before = [sha for i, sha, _ in reversed(probed) if since <= i < at]  # nearest first
        after = [sha for i, sha, _ in probed if at <= i < until]
        if not before or not after:
            continue
        step = _level(after, drawn) - _level(before, drawn)
        found.append({"ref": sha, "delta_pct": round(step / good * 100, 2), "share_pct": round(step / drop * 100, 1)})
    biggest = max((s["share_pct"] for s in found), default=0.0)
    shape = "one step" if len(found) <= 1 and not intermediate else "gradual" if biggest < 50 else "steps"
    return {
        "shape": shape,
        "steps": found,
        "intermediate": intermediate,
        "levels": [{"ref": sha, "median": round(v, 4)} for _, sha, v in probed],
    }


def _level(nearest_first: list[str], drawn: dict[str, list[float]]) -> float:
    """The median of the first probe's samples pooled with those of the probes after it, in turn,
    until one is apart from it (a later step, or a fix that gave it back, ends the level)."""
    pool = list(drawn[nearest_first[0]])
    for sha in nearest_first[1:]:
        if _differ(drawn[nearest_first[0]], drawn[sha]):
            break
        pool += drawn[sha]
    return median(pool)


def _differ(end: list[float], probe: list[float]) -> bool:
    """Is a probe's level apart from an end's beyond their noise? Medians three standard errors
    apart, the noise the larger of the probe's own spread and the end's (robust sds): a probe of
    3 samples (a launch) can be a level of its own, where a rank test at p <= 0.01 needs more; a
    probe whose samples spread over both ends' levels cannot."""
    a, b = np.asarray(end, dtype=float), np.asarray(probe, dtype=float)
    if a.size < 2 or b.size < 2:
        return False
    sd = max(noise_sd(a, a), noise_sd(b, b))
    gap = abs(float(np.median(a)) - float(np.median(b)))
    return gap > 3 * sd * float(np.sqrt(1 / a.size + 1 / b.size))


# One state measured twice this far apart (and beyond its noise) says the machine changed speed
# between the two: at least this many percent, or a quarter of the drop being hunted.
DRIFT_PCT = 5.0


def drifted(hunt: Hunt) -> str | None:
    """Did the machine change speed during the hunt? One state (the same commit, launch and
    environment, measured twice: "now" and "HEAD" of a clean tree, HEAD in two A/Bs) whose first
    and last measurements differ beyond their noise (a rank test, p <= 0.01) by at least
    ``DRIFT_PCT`` or a quarter of the drop: then numbers taken at different times are not
    comparable, and the report says so (a loaded machine's hunt showed now 98.5 and HEAD 167.3
    for one state, side by side, without a word)."""
    states: dict[tuple, list] = {}
    for m in hunt.measurements:
        if len(m.samples) >= 3:
            states.setdefault((m.ref, tuple(sorted(m.env.items())), m.launch), []).append(m)
    floor = max(DRIFT_PCT, abs(hunt.regression.get("delta_pct") or 0.0) / 4)
    worst = None
    for ms in states.values():
        first, last = ms[0], ms[-1]
        if first is last or not first.median:
            continue
        pct = (last.median - first.median) / abs(first.median) * 100
        if abs(pct) < floor or (worst is not None and abs(pct) <= abs(worst[0])):
            continue
        cmp = compare(first.samples, last.samples, alpha=0.01, interval=False)
        if cmp.verdict == "different":
            worst = (pct, first, last, cmp.p_value)
    if worst is None:
        return None
    pct, first, last, p = worst
    return (
        f"the machine's speed changed during the hunt: one state ({first.ref[:10]}) measured "
        f"{first.median:.4g} as {first.label} and {last.median:.4g} as {last.label} ({pct:+.1f}%, p={p:.2g}); "
        "numbers taken at different times are not comparable"
    )


def of_the_drop(pct: float, what: str = "of the drop") -> str:
    """A share of the drop in words: over 100 % the measured share is noise around all of it (a
    step or a fix measured at another time than the drop), said as such, not "114 % of the drop"."""
    return f"{pct:.0f}% {what}" if pct <= 100 else f"all {what}, {pct:.0f}% as measured"


def sentence(hunt: Hunt) -> str:
    """One line for the report: strength, corrected p, and the shape with its steps."""
    parts = []
    s = strength(hunt)
    if s is not None:
        p = f", p = {s['p_value']:.2g} ({s['p_corrected']:.2g} after {s['tests']} tests)" if s["p_value"] else ""
        parts.append(f"Evidence: **{s['evidence']}**{p}.")
    shape = steps(hunt)
    if shape is not None:
        listed = ", ".join(
            f"`{x['ref'][:10]}` {x['delta_pct']:+.1f}% ({of_the_drop(x['share_pct'])})" for x in shape["steps"]
        )
        between = shape["intermediate"]
        extra = f"; probed at a level between the two: {', '.join(f'`{x[:10]}`' for x in between)}" if between else ""
        parts.append(f"Shape of the drop: **{shape['shape']}**" + (f": {listed}" if listed else "") + extra + ".")
    return " ".join(parts)
