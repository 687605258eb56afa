"""Several causes of different kinds: a pulled commit *and* an uncommitted patch, a package *and*
an env var. When hypotheses of more than one category are supported, each is localized and
confirmed on its own, its share of the drop measured (the A/B with only it removed, against the
drop the hunt reproduced), and all of them are named: ``root_cause.kind`` is ``multiple`` and the
verdict's ``root_causes`` lists each with its kind, ref and share. The proposal fixes all of them:
the revert (the one step perf-sleuth can land) first, the others as the commands a person runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from agent.experiments import drop_ends, explains, fmt, fresh_ab, freshness, history_ab, is_better
from agent.runtime import Runtime
from agent.state import Action, Hunt, Measured
from tools.git import revert_branch

AUTOMATIC = ("revert", "unset", "restore", "pin")  # actions that wait for a person's approval
# Causes whose removal recovers at least this much of the drop explain it: below it the rest is
# looked for (``agent.residual``); at or above it a further step is not a cause of its own.
EXPLAINED_PCT = 80.0


def localize(hunt: Hunt, rt: Runtime, categories: list[str], name: Callable[[str], None]) -> None:
    """Name the cause of each supported category (``name`` sets ``hunt.root_*`` for one)."""
    causes = []
    for cat in categories:
        hunt.root_kind, hunt.root_ref, hunt.root_summary = None, None, ""
        name(cat)
        if hunt.root_kind is None:
            continue
        causes.append(
            {
                "category": cat,
                "kind": hunt.root_kind,
                "ref": hunt.root_ref or "",
                "summary": hunt.root_summary,
                "culprits": list(hunt.culprits) if hunt.root_kind == "commit" else [],
            }
        )
    hunt.root_causes = causes
    _settle(hunt, rt)


def _settle(hunt: Hunt, rt: Runtime) -> None:
    """The hunt's root from its causes: ``multiple`` while more than one stands, else that one."""
    causes = hunt.root_causes
    if len(causes) == 1:
        c = causes[0]
        hunt.root_kind, hunt.root_ref, hunt.root_summary = c["kind"], c["ref"], c["summary"]
        hunt.culprits = c["culprits"]
        hunt.root_causes = []
        return
    hunt.root_kind = "multiple"
    hunt.root_ref = ", ".join(c["ref"] for c in causes)
    hunt.root_summary = f"{len(causes)} causes: " + "; ".join(f"[{c['kind']}] {c['summary']}" for c in causes)
    hunt.culprits = [sha for c in causes for sha in c["culprits"]]
    rt.say(hunt, "localize", hunt.root_summary)


def confirm(hunt: Hunt, rt: Runtime, confirm_one: Callable[[Hunt, Runtime], bool]) -> bool:
    """Confirm each cause afresh: a commit by its revert, the others by their own A/B taken again
    on servers launched for it (``_confirm_again``); a cause that fails is dropped. The shares are
    measured last. False when none is left."""
    kept = []
    commit_confirmation: dict = {}
    for c in hunt.root_causes:
        if c["kind"] == "commit":
            hunt.root_kind, hunt.root_ref, hunt.culprits = "commit", c["ref"], c["culprits"]
            if not confirm_one(hunt, rt):
                rt.say(hunt, "confirm", f"cause dropped, its revert recovers nothing: {c['summary']}")
                continue
            c["ref"], c["culprits"] = hunt.root_ref, list(hunt.culprits)
            c["confirmation"] = commit_confirmation = hunt.confirmation
        elif not _confirm_again(hunt, rt, c):
            continue
        kept.append(c)
    hunt.root_causes = kept
    hunt.confirmation = commit_confirmation
    if not kept:
        hunt.root_kind, hunt.root_ref, hunt.culprits = None, None, []
        return False
    _with_shares(hunt, rt)
    return True


def _with_shares(hunt: Hunt, rt: Runtime) -> None:
    """Each confirmed cause's share of the drop, then the hunt's root from them (``_settle``)."""
    for c in hunt.root_causes:
        c["share_pct"] = share(hunt, c)
    _settle(hunt, rt)
    if hunt.root_kind == "multiple":
        said = ", ".join(
            f"{c['ref'][:10]} {c['share_pct']:.0f}%" for c in hunt.root_causes if c["share_pct"] is not None
        )
        rt.say(hunt, "confirm", f"shares of the drop: {said}")
        _combined_revert(hunt, rt)


def _combined_revert(hunt: Hunt, rt: Runtime) -> None:
    """Several commit causes whose reverts each apply at HEAD: one chain of reverts (each on top of
    the one before) that an approval lands as one branch, kept on the first such cause as
    ``combined``. Before this an approval landed the first revert alone and left the others as
    words ("then revert ..."). A revert that does not apply on top of the others ends the chain
    there: the rest stay steps for a person."""
    commits = [
        c
        for c in hunt.root_causes
        if c["kind"] == "commit" and (c.get("confirmation") or {}).get("revert_sha")
        and not (c.get("confirmation") or {}).get("conflict")
    ]  # fmt: skip
    if len(commits) < 2:
        return
    base, refs, plan = commits[0]["confirmation"]["revert_sha"], [commits[0]["ref"]], None
    for c in commits[1:]:
        rec = rt.tool("git_prepare_revert", {"culprit": c["ref"], "base": base}, hunt=hunt)
        if not rec.ok or rec.result["conflict"]:
            rt.say(hunt, "confirm", f"{c['ref'][:10]} does not revert on top of {', '.join(r[:10] for r in refs)}")
            break
        base, plan = rec.result["revert_sha"], rec.result
        refs.append(c["ref"])
    if plan is not None:
        commits[0]["combined"] = {"refs": refs, "revert_sha": base, "plan": plan}
        rt.say(hunt, "confirm", f"one chain of reverts for {', '.join(r[:10] for r in refs)}: {base[:10]}")


def steps(hunt: Hunt, rt: Runtime, kept: list[tuple[str, dict, str]]) -> None:
    """Several commits of one range, each a step the bisection found and its own revert confirmed
    (sha, confirmation, subject): each is a cause with its share of the drop (what reverting it
    alone recovers), named together as ``multiple``. Before this the first was named alone, its
    share said as "the rest is not explained", and the search for the rest re-bisected a range
    whose second step was already found and confirmed."""
    hunt.root_causes = [
        {
            "category": "history",
            "kind": "commit",
            "ref": sha,
            "summary": f'{sha[:10]} "{subject}"',
            "culprits": [sha],
            "confirmation": conf,
        }
        for sha, conf, subject in kept
    ]
    hunt.confirmation = kept[0][1]
    _with_shares(hunt, rt)


def _confirm_again(hunt: Hunt, rt: Runtime, cause: dict) -> bool:
    """A cause that is not a commit was supported by one A/B (HEAD vs the working tree, the env
    var removed, ...). Beside a real cause that one test is easy to pass by chance: a hunt runs
    several, and under a neighbour's load a harmless patch once measured 10.6 % slower than HEAD
    (p = 0.009) in CI, and was named beside the real commit. So the same two states are measured
    again, fresh, on servers launched for it, and the cause stands only if this A/B explains a
    part of the drop too. Its numbers are then the cause's share."""
    h = next((h for h in hunt.hypotheses if h.category == cause["category"] and h.status == "supported"), None)
    if h is None or len(h.evidence) < 2:
        return True  # nothing to take again (a reading, not an A/B): it stands on what supported it
    fixed, slow = hunt.get(h.evidence[0]), hunt.get(h.evidence[1])
    if not is_better(hunt, fixed, slow):  # categories keep their pair in either order
        fixed, slow = slow, fixed
    cmp, fixed, slow = fresh_ab(hunt, rt, fixed, slow, len(fixed.samples))
    text = fmt(cmp, fixed, slow, hunt.target.metric) + freshness(fixed, slow)
    if not explains(hunt, cmp, fixed, slow):
        h.status = "inconclusive"
        h.reason += f"; not confirmed, taken again on fresh launches: {text}"
        rt.say(hunt, "confirm", f"cause dropped, a fresh A/B does not reproduce it ({text}): {cause['summary']}")
        return False
    cause["confirmation"] = {"ok": True, "text": text, "p_value": cmp.p_value, "evidence": [fixed.id, slow.id]}
    rt.say(hunt, "confirm", f"confirmed again on fresh launches: {text}")
    return True


def share(hunt: Hunt, cause: dict) -> float | None:
    """The share of the reproduced drop that removing only this cause recovers, in percent: its
    own A/B (a commit: HEAD vs HEAD with it reverted; the others: the A/B that supported them)
    over the drop from the alert's good value to what was reproduced; a hunt without alert values
    (``--bench`` with a known-good ref) over the drop its history A/B measured (``drop_ends``).
    Before that such a hunt had no shares, so a second step could never be weighed against the
    first.

    In log terms (``fraction``): the cause's own A/B and the drop are measured at different
    times, and a machine's load scales a benchmark's numbers on both sides of an A/B alike. Over
    a 250x drop a share of absolute differences moved with that scale: a timeit benchmark whose
    confirmation ran on a quieter machine than its history A/B "recovered 79 % of the drop", and
    the hunt went looking for a rest that was not there."""
    ends = the_drop(hunt)
    if ends is None:
        return None
    good, bad = ends
    if cause["kind"] == "commit" or (cause.get("confirmation") or {}).get("evidence"):
        evidence = (cause.get("confirmation") or {}).get("evidence", [])
    else:
        h = next((h for h in hunt.hypotheses if h.category == cause["category"] and h.status == "supported"), None)
        evidence = h.evidence if h is not None else []
    if len(evidence) < 2:
        return None
    a, b = hunt.get(evidence[0]), hunt.get(evidence[1])
    return round(fraction(a.median, b.median, good, bad) * 100, 1)


def most_explained(hunt: Hunt, cause: dict) -> float | None:
    """The largest share of the drop this cause's A/B could be, in percent, where the drop is as
    small as its ends' 95 % intervals allow (an alert's value is a point; a measured end has its
    interval): a share under ``residual.GO_ON_BELOW`` at this bound shows a rest of the drop that
    the cause leaves; above it, the numbers do not tell a rest from noise. None when the drop's
    ends or the cause's A/B are not known; infinity where the intervals overlap (no drop at all
    is within them). A trial's 12 % step under 10-40 % noise "recovered 59 % of the drop: the
    rest is not explained" beside a shape of one step carrying 94 % of it: the drop's own ends
    (246.7 [208.2, 273.1] against 299.4 [257.9, 330.9]) allowed the whole of it."""
    sides = _drop_sides(hunt)
    pct = share(hunt, cause)
    if sides is None or pct is None:
        return None
    (good, g), (bad, b) = sides
    worse_up = bad > good  # the bad end's number is the larger one (a time, or a slower rate read as such)
    near_good = good if g is None else (g.ci_high if worse_up else g.ci_low)
    near_bad = bad if b is None else (b.ci_low if worse_up else b.ci_high)
    if (near_bad <= near_good) if worse_up else (near_bad >= near_good):
        return math.inf
    return pct / fraction(near_good, near_bad, good, bad)


def _drop_sides(hunt: Hunt) -> tuple[tuple[float, Measured | None], tuple[float, Measured | None]] | None:
    """``the_drop``'s ends, each with the measurement it is the median of (None for a value the
    alert or the user gave)."""
    ends = the_drop(hunt)
    if ends is None:
        return None
    now = hunt.get(hunt.reproduced) if hunt.reproduced else None
    if hunt.target.good_value:
        return (ends[0], None), (ends[1], now if now is not None and now.median == ends[1] else None)
    good, head = history_ab(hunt) or (None, None)
    return (ends[0], good), (ends[1], head)


def the_drop(hunt: Hunt) -> tuple[float, float] | None:
    """The drop a share is a part of, (good, bad): the alert's good value to what was reproduced,
    or, without alert values, the ends its history A/B measured; None when there is none."""
    now = hunt.get(hunt.reproduced) if hunt.reproduced else None
    good, bad = hunt.target.good_value, now.median if now is not None else None
    if not good and (ends := drop_ends(hunt)):
        good, bad = ends
    if bad is None or not good or good == bad:
        return None
    return good, bad


def fraction(a: float, b: float, good: float, bad: float, signed: bool = False) -> float:
    """log(a / b) over log(good / bad): how much of the change from good to bad the change from a
    to b is, as ratios (two causes of 1.25x each have half each, whichever was measured first).
    Absolute differences where a value is not positive (a metric that can be 0 or less). Unsigned
    unless ``signed``: then negative where a to b goes the other way (clean HEAD slower than now
    gives back nothing of a drop, ``environment``'s question before the known-good launch)."""
    f = math.log(a / b) / math.log(good / bad) if min(a, b, good, bad) > 0 else (a - b) / (good - bad)
    return f if signed else abs(f)


def propose(hunt: Hunt, action_for: Callable[[Hunt], Action]) -> Action:
    """One action per cause (kept on the cause), and the hunt's action: the first that waits for
    approval (a revert before the rest), its detail naming every fix in turn."""
    actions = []
    confirmation = hunt.confirmation
    combined = next((c["combined"] for c in hunt.root_causes if c.get("combined")), None)
    for c in hunt.root_causes:
        hunt.root_kind, hunt.root_ref = c["kind"], c["ref"]
        hunt.confirmation = c.get("confirmation") or {}
        action = action_for(hunt)
        if c.get("combined"):  # one branch for every commit of the chain
            refs = c["combined"]["refs"]
            action = action.model_copy(
                update={
                    "revert_sha": c["combined"]["revert_sha"],
                    "branch": revert_branch(*refs),
                    "detail": f"revert {' and '.join(refs)} on a new branch (a prepared chain of {len(refs)} reverts)",
                }
            )
        elif combined is not None and c["ref"] in combined["refs"]:
            c["action"] = f"reverted in the chain on branch {revert_branch(*combined['refs'])}"
            continue
        c["action"] = action.detail
        actions.append(action)
    hunt.root_kind, hunt.root_ref = "multiple", ", ".join(c["ref"] for c in hunt.root_causes)
    hunt.confirmation = confirmation
    if combined is not None:  # what an approval lands
        hunt.confirmation = {**confirmation, "plan": combined["plan"]}
    order = sorted(actions, key=lambda a: (a.kind != "revert", a.kind not in AUTOMATIC))
    first = order[0].model_copy()
    first.detail = "; then ".join(a.detail for a in order)
    return first
