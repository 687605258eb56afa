"""History: a commit since the known-good ref slows it.

Suspected from the alert's good ref or the reflog's last pull; tested by an A/B of that ref vs
HEAD; localized by a noise-aware bisection of the range (commits that touch no executed file
pruned first, ``tools.codepath``); confirmed by a fresh A/B of HEAD vs HEAD with the culprit
reverted (or, when the revert conflicts, the culprit's parent vs the culprit). Fix: the prepared
revert on a new branch, or a person's merge when it conflicts.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.experiments import (
    MIN_DROP_PCT,
    ab,
    conflicts_said,
    drop_ends,
    explains,
    files_said,
    fmt,
    fresh_ab,
    freshness,
    min_effect_pct,
    record_confirmation,
    set_verdict,
    under_said,
    verdict_of,
)
from agent.multiple import EXPLAINED_PCT, share
from agent.runtime import BudgetExhausted, Runtime
from agent.state import Action, Hunt, Hypothesis, Measured
from tools.bisect import BisectConfig, BisectResult, ProbeError, bisect, where_stopped
from tools.git import revert_branch
from tools.measure import StateFailure
from tools.stats import compare
from tools.text import first_line

NAME = "history"


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    """The alert's good ref, else the HEAD before the last pull, reset, merge, rebase or checkout."""
    candidate, how = hunt.target.good_ref, "the known-good ref given"
    reflog = rt.tool("git_reflog", {"limit": 50}, hunt=hunt) if candidate is None else None
    if candidate is None and reflog is not None and reflog.ok and (e := last_move(reflog.result["entries"])):
        candidate, how = e["old_sha"], f"HEAD before '{e['action']}' ({e['time']})"
    if candidate:
        hunt.good_candidate = rt.resolve(hunt, candidate)
        if hunt.good_candidate == hunt.head_sha:  # no commit between them: nothing to suspect
            rt.say(hunt, "plan", f"no history hypothesis: {how} is HEAD itself ({hunt.head_sha[:10]})")
            return
        add(
            NAME,
            f"a commit since {hunt.good_candidate[:10]} ({how}) slows it",
            f"A/B: {hunt.good_candidate[:10]} vs HEAD, then bisection",
            hunt.good_candidate,
        )


def last_move(entries: list[dict]) -> dict | None:
    """The newest reflog entry (newest first) that moved HEAD from a commit: a pull, reset, merge,
    rebase or checkout. Its ``old_sha`` is where the code was before: the last known good."""
    moves = ("pull", "reset", "merge", "rebase", "checkout")
    return next((e for e in entries if e["command"] in moves and e["old_sha"] != "0" * 40), None)


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    """The known-good commit vs HEAD, both under the bisection's environment (``probe_env``).
    Not tested where the clean A/B left the known-good commit out (``hunt.history_unneeded``: the
    working tree gives the whole drop back) and a variable or a file of it is the cause found."""
    if hunt.history_unneeded and any(
        x.status == "supported" and x.category in ("environment", "uncommitted") for x in hunt.hypotheses
    ):
        h.status, h.reason = "untested", f"not tested: {hunt.history_unneeded}"
        rt.say(hunt, "test", f"{h.id} not tested: the working tree holds the whole drop")
        return
    env = hunt.probe_env or None
    together = [hunt.get(i) for i in hunt.history_round]
    if together and together[0].env == (env or {}):
        # Measured in one experiment with the clean A/B (its clean HEAD is this HEAD).
        good, head = together
        cmp, good, head = ab(hunt, rt, good, head, "good-candidate", "HEAD", better="a", first=True)
    else:
        good = rt.planned(hunt, "good-candidate", hunt.good_candidate, env=env)  # type: ignore[arg-type]
        head = rt.planned(hunt, "HEAD", "HEAD", env=env)
        cmp, good, head = ab(hunt, rt, good, head, "good-candidate", "HEAD", better="a")
    text = fmt(cmp, good, head, hunt.target.metric)
    if together:
        launches = f" ({len(good.groups) + len(head.groups)} launches)" if good.launch else ""
        text += f"; measured with the clean A/B in one experiment{launches}"
    if env:
        text += f"; both with {', '.join(sorted(env))} blanked (they change nothing: see the clean A/B)"
    # Without an alert's values this A/B is the measure of the drop: what is hunted is a drop of
    # at least the reproduction's floor, not the 5 % a part of a drop of unknown size must show
    # (+4.7 %, p = 0.002 between two real releases ended "no regression").
    least = MIN_DROP_PCT if drop_ends(hunt) is None else min_effect_pct(hunt)
    status = verdict_of(hunt, cmp, good, head, least=least)
    set_verdict([h], status, text + under_said(hunt, cmp, good, head, least), [good.id, head.id])


def ref_growth(hunt: Hunt, rt: Runtime) -> float:
    """How the ends grow with a probe that outgrows them (``BisectConfig.ref_growth``): in coarse
    steps where launches are dear (each top-up of an end is a launch, and the probe's next samples
    another), step for step with the probe elsewhere (the drift fit gains from ends measured often)."""
    return 1.5 if rt.dear_launches(hunt) else 1.0


class NothingExecutedChanged(RuntimeError):
    """Every commit of the range touches no file the workload executes: no commit of it can be
    the cause, whatever an A/B of its ends said (a trial's noisy A/B of a README-only commit's
    ends read "different", and the hunt named that commit "likely" after bisecting 0 of 1)."""


def bisect_history(hunt: Hunt, rt: Runtime, good_ref: str, bad_ref: str) -> tuple[list[str], BisectResult]:
    """Bisect good..bad with the hunt's probes (budgeted, recorded); the culprits land in
    ``hunt.culprits`` and every probed commit's samples in its measurements."""
    good, head = rt.resolve(hunt, good_ref), rt.resolve(hunt, bad_ref)
    hunt.good_candidate = hunt.good_candidate or good
    parents = rt.rev_list(hunt, good, head)
    hunt.bisected = list(reversed(list(parents)))  # rev-list is newest first (topological)
    no_ops = _prune(hunt, rt, good, head, parents)
    if parents and set(parents) <= set(no_ops):
        raise NothingExecutedChanged(
            f"none of the {len(parents)} commit(s) {good[:10]}..{head[:10]} touches a file the workload executes "
            "(each pruned, above): the difference is not in these commits"
        )
    rt.say(
        hunt, "localize", f"bisecting {len(parents) - len(no_ops)} of {len(parents)} commits {good[:10]}..{head[:10]}"
    )
    # No sandwich on the first bisection: the confirmation A/B (HEAD vs HEAD with the culprit
    # reverted) proves the same thing more directly. After a failed confirmation the second
    # bisection verifies each culprit against its parent with more samples.
    seen: dict[str, list[float]] = {}
    res = bisect(
        parents,
        good,
        head,
        rt.probe_fn(hunt, seen),
        BisectConfig.for_probes(
            bool(hunt.target.command),
            higher_is_better=hunt.target.higher_is_better,
            verify=bool(hunt.rejected_culprits),
            known_ref_samples=_known_samples(hunt, good, head, rt.probe_state(hunt, head).launch),
            no_ops=no_ops,
            ref_growth=ref_growth(hunt, rt),
        ),
        stop_on=(BudgetExhausted,),
    )
    if res.stopped is not None:
        # What the bisection learned before the budget ran out is the hunt's to keep: its probes
        # in the Numbers, and what it had found in the line that says why it stopped.
        _keep_probes(hunt, rt, seen)
        raise BudgetExhausted(_stopped_at(hunt, rt, parents, head, no_ops, res))
    _keep_probes(hunt, rt, seen)
    hunt.culprits = [c.sha for c in res.culprits]
    return parents, res


def _stopped_at(
    hunt: Hunt, rt: Runtime, parents: dict[str, list[str]], head: str, no_ops: list[str], res: BisectResult
) -> str:
    """Why a bisection stopped (its budget) and what it had found: the steps it had named (not
    yet confirmed by an A/B) and the range its search above the last one, or its first search,
    had narrowed to. A search above a step judges its probes against that step's level, so the
    whole range's decisions would name the commits above the step and leave the step out."""
    stop = where_stopped(parents, head, no_ops, res)
    found, left, live = stop.found, stop.left, stop.live
    steps = ", ".join(s[:10] for s in found)
    said = f"; the bisection had found a step at {steps} (not yet confirmed by an A/B)" if found else ""
    if not left:  # no probe decided: the pruned commits alone are no narrowing
        if found and live:
            said += f" and had not yet narrowed the {live} commits above it"
        return res.stopped + said
    ends = f"{left[-1][:10]}^..{left[0][:10]}" if len(left) > 1 else left[0][:10]  # git log takes it
    where = f" and narrowed the {stop.commits} commits above it" if found else ""
    where = where or f"; the bisection had narrowed {stop.commits} commits"
    return f"{res.stopped}{said}{where} to {len(left)} ({ends})" + _undone_in(hunt, rt, left)


UNDONE_LOOKUPS = 8  # commits of a narrowed range looked up for a later revert, at most


def _undone_in(hunt: Hunt, rt: Runtime, left: list[str]) -> str:
    """What a stopped bisection's range leaves unsaid: a commit in it that a later commit
    reverts. The search narrowed toward a step; when that step was undone, the slowness at HEAD
    came back later (a re-land), outside the range the stop names. Looked up for a short range
    only (one lookup a commit)."""
    if len(left) > UNDONE_LOOKUPS:
        return ""
    for sha in left:
        rec = rt.tool("git_reverts_of", {"sha": sha, "head": "HEAD"}, hunt=hunt)
        reverts = rec.result["commits"] if rec.ok else []
        if reverts:
            undo = reverts[-1]
            return (
                f"; {sha[:10]} in it was reverted later by {undo['sha'][:10]}: the slowness at HEAD may be a "
                "later re-land, outside this range"
            )
    return ""


def _keep_probes(hunt: Hunt, rt: Runtime, seen: dict[str, list[float]]) -> None:
    """Each probed commit's samples as a measurement of its own (the Numbers, the plot). Two
    commits with one tree (a merge and its parent) are measured once (the cache is by tree): the
    second's label says so, where two rows of the same numbers stood unexplained."""
    known = {m.ref for m in hunt.measurements}
    firsts: dict[tuple[float, ...], str] = {}
    for sha, got in seen.items():
        twin = firsts.setdefault(tuple(got), sha)
        if sha not in known:
            same = f" (same tree as {twin[:8]})" if twin != sha else ""
            rt.record_samples(hunt, f"bisect {sha[:8]}{same}", sha, got)


def _prune(hunt: Hunt, rt: Runtime, good: str, head: str, parents: dict[str, list[str]]) -> list[str]:
    """The commits of the range that touch no file the workload executes (``tools.codepath``):
    the bisection neither probes nor blames them. Listed on the hunt with the reason."""
    paths = rt.code_paths(hunt, good, head)
    if not paths["traced"]:
        rt.say(hunt, "localize", f"no code-path pruning: {paths['why']}")
        return []
    pruned = [c for c in paths["commits"] if c["pruned"] and c["sha"] in parents]
    for c in paths["commits"]:
        inert = [f for f in c["files"] if f not in c.get("executed", c["files"])]
        if not c["pruned"] and inert:
            hunt.inert_files[c["sha"]] = inert
    hunt.pruned = [{"sha": c["sha"], "files": c["files"], "reason": c["reason"]} for c in pruned]
    if pruned:
        listed = "; ".join(f"{c['sha'][:10]} ({c['reason']})" for c in pruned)
        rt.say(
            hunt,
            "localize",
            f"{len(pruned)} of {len(parents)} commits touch no executed file ({paths['why']}): {listed}",
        )
    return [c["sha"] for c in pruned]


def _known_samples(hunt: Hunt, good: str, head: str, launch: str) -> int:
    """Samples the hunt already holds of both ends as the bisection probes them (the target's
    launch under ``probe_env``, no patch): the history A/B's, reused as the references."""
    plain = [m for m in hunt.measurements if m.launch == launch and m.env == hunt.probe_env]
    have = {ref: max((len(m.samples) for m in plain if m.ref == ref), default=0) for ref in (good, head)}
    return min(have.values())


def subject_of(hunt: Hunt, rt: Runtime, sha: str) -> str:
    show = rt.tool("git_show_stat", {"ref": sha}, hunt=hunt)
    return show.result["commit"]["subject"] if show.ok else ""


# How many times a named step may turn out undone by a later revert before the search stops
# (a change landed, reverted, re-landed, reverted again ... is rare past two rounds).
MAX_UNDONE = 3


def at_head(hunt: Hunt, rt: Runtime, h: Hypothesis, parents: dict, res: BisectResult) -> tuple[dict, BisectResult]:
    """The named culprit must be the cause at HEAD, not a step that history later undid. A later
    commit that reverts it, by its message ("This reverts commit SHA") or by deleting at least
    half of the lines it added without saying so, may have undone its step: that revert is
    measured against HEAD (a fresh A/B); when it is better, the slowness at HEAD came back after
    it (a re-land, a revert of the revert, another change) and revert..HEAD is bisected in turn.
    The undone step is kept as history on the hunt (``undone``), said in the verdict, never named
    as the cause. A revert that measures like HEAD did not undo the slowness: the culprit stands."""
    full = hunt.bisected
    for _ in range(MAX_UNDONE):
        culprit = hunt.culprits[0]
        rec = rt.tool("git_reverts_of", {"sha": culprit, "head": "HEAD"}, hunt=hunt)
        reverts = rec.result["commits"] if rec.ok else []
        if not reverts:
            break
        undo = reverts[-1]  # the oldest: where the step was first undone
        subject = subject_of(hunt, rt, culprit)
        reverted = rt.planned(hunt, "reverted", undo["sha"], env=hunt.probe_env or None)
        head = rt.planned(hunt, "HEAD", "HEAD", env=hunt.probe_env or None)
        cmp, reverted, head = ab(hunt, rt, reverted, head, "reverted", "HEAD", better="a")
        numbers = fmt(cmp, reverted, head, hunt.target.metric)
        if not explains(hunt, cmp, reverted, head):
            note = f"; {undo['sha'][:10]} reverts it, but does not measure better than HEAD ({numbers})"
            h.reason += note
            rt.say(hunt, "localize", f"{culprit[:10]} stands{note}")
            break
        step = {
            "sha": culprit,
            "subject": subject,
            "reverted_by": undo["sha"],
            "revert_subject": undo["subject"],
            "numbers": numbers,
        }
        # Found again by a search after a self-correction: listed once, with its latest numbers;
        # and no longer a culprit of the hunt's, whatever stops the next search (a budget stop left
        # the verdict's ``culprits`` naming the undone step, twice listed in ``undone``).
        hunt.undone = [u for u in hunt.undone if (u["sha"], u["reverted_by"]) != (culprit, undo["sha"])] + [step]
        hunt.culprits = [c for c in hunt.culprits if c != culprit]
        silently = " (it deletes the lines it added; its message does not say so)" if undo.get("by") == "lines" else ""
        said = (
            f'{culprit[:10]} "{subject}" was undone by {undo["sha"][:10]} "{undo["subject"]}"{silently} ({numbers}): '
            f"history, not the cause at HEAD; bisecting {undo['sha'][:10]}..HEAD"
        )
        h.reason += f"; {said}"
        rt.say(hunt, "localize", said)
        parents, res = bisect_history(hunt, rt, undo["sha"], "HEAD")
    hunt.bisected = full  # the plot's axis: the whole range, every probe of every search on it
    return parents, res


# A culprit's step this many times the drop still measured at HEAD: later commits (not reverts,
# which ``at_head`` follows) gave most of it back, and the summary says so.
GIVEN_BACK_AT = 2.0


def given_back(hunt: Hunt) -> str | None:
    """Is the named step much larger than what is left of it at HEAD? (A later fix that is not a
    revert: mlx-lm's #674 took a 2.8x TTFT step back to +8 %.) The numbers are the hunt's own:
    the known-good and HEAD of the history A/B, and the culprit's bisection probe."""
    last = {m.label: m for m in hunt.measurements}
    good, head = last.get("good-candidate"), last.get("HEAD")
    culprit = hunt.culprits[0] if hunt.culprits else None
    probe = next((m for m in last.values() if m.ref == culprit and m.label.startswith("bisect ")), None)
    if good is None or head is None or probe is None or good.median == 0:
        return None
    worse = -1.0 if hunt.target.higher_is_better else 1.0
    step, drop = worse * (probe.median - good.median), worse * (head.median - good.median)
    if step <= 0 or drop <= 0 or step < GIVEN_BACK_AT * drop:
        return None
    # The culprit's probe and HEAD must differ by their samples, not only by medians: a probe of a
    # few samples taken while the machine was loaded put its median at 228 against HEAD's 142
    # (its interval reached down to 129), and the report said later commits gave back 75 %.
    if compare(head.samples, probe.samples, alpha=0.01, interval=False).verdict != "different":
        return None
    return (
        f"its step (good {good.median:.4g} -> {probe.median:.4g} there) is {step / drop:.1f}x what is left at HEAD "
        f"({head.median:.4g}): later commits gave back {(step - drop) / step * 100:.0f}% of it"
    )


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    """Bisect the range and name the first culprit (its subject), with the bisection's numbers;
    a culprit a later commit reverted is followed to the commit slow at HEAD (``at_head``)."""
    h = next(x for x in sup if x.category == NAME)
    parents, res = bisect_history(hunt, rt, hunt.good_candidate, "HEAD")  # type: ignore[arg-type]
    parents, res = at_head(hunt, rt, h, parents, res)
    subject = subject_of(hunt, rt, hunt.culprits[0])
    hunt.root_kind, hunt.root_ref = "commit", hunt.culprits[0]
    hunt.root_summary = f'{hunt.culprits[0][:10]} "{subject}"'
    pruned = f" ({len(hunt.pruned)} pruned: no executed file)" if hunt.pruned else ""
    h.reason += (
        f"; bisection: {len(parents)} commits{pruned}, {res.probes} probe{'s' * (res.probes != 1)}, "
        f"{res.samples} samples -> "
        + ", ".join(
            f"{c.sha[:10]} ({c.delta_pct:+.1f}% vs parent, verified={c.verified})"
            if c.delta_pct is not None
            else c.sha[:10]
            for c in res.culprits
        )
    )
    bordering = [s for s in res.culprits[0].suspects if s != res.culprits[0].sha] if res.culprits else []
    if bordering:  # skipped (unbuildable) commits between the last good one and the culprit
        note = (
            f"; {', '.join(s[:10] for s in bordering)} could not be measured (skipped) and "
            f"{'borders' if len(bordering) == 1 else 'border'} it: the first bad commit may be "
            + ("that one" if len(bordering) == 1 else "one of those")
        )
        hunt.root_summary += note
        h.reason += note
    back = given_back(hunt)
    if back:
        hunt.root_summary += f"; {back}"
        h.reason += f"; {back}"
    if hunt.undone:
        hunt.root_summary += "; " + "; ".join(
            f"{u['sha'][:10]} landed such a step earlier, undone by {u['reverted_by'][:10]}" for u in hunt.undone
        )
    rt.say(hunt, "localize", f"culprit {hunt.root_summary}")


def action(hunt: Hunt) -> Action:
    ref = hunt.root_ref
    if hunt.confirmation.get("untestable"):
        return Action(
            kind="investigate",
            ref=ref,
            detail=f"{hunt.confirmation['why']}: no A/B could confirm {ref}; check it by hand before reverting",
        )
    if hunt.confirmation.get("conflict"):
        return Action(
            kind="investigate",
            ref=ref,
            detail=f"{hunt.confirmation['why']}: revert {ref} by hand (`git revert {ref}`) and resolve",
        )
    kept = kept_said(hunt.confirmation.get("plan") or {}, end="")
    return Action(
        kind="revert",
        ref=ref,
        revert_sha=hunt.confirmation.get("revert_sha"),
        branch=revert_branch(ref or ""),
        detail=f"revert {ref} on a new branch (the prepared revert commit{'; ' + kept if kept else ''})",
    )


def confirm(hunt: Hunt, rt: Runtime) -> bool:
    """Each of ``hunt.culprits`` against its revert; the first kept becomes ``hunt.root_ref``."""
    return bool(confirm_steps(hunt, rt))


def confirm_steps(hunt: Hunt, rt: Runtime) -> list[tuple[str, dict]]:
    """``confirm``, returning every culprit kept with its own confirmation (each revert's fresh
    A/B), so that several steps of one range can each be named with its share of the drop."""
    kept: list[tuple[str, dict]] = []
    head: tuple[str, Measured] | None = None  # (culprit, HEAD) as the confirmation before measured it
    for sha in list(dict.fromkeys(hunt.culprits or [hunt.root_ref or ""])):
        hunt.root_ref = sha
        confirmed = _confirm_one(hunt, rt, head)
        head = (sha, h) if (h := _fresh_head(hunt)) is not None else head
        if not confirmed:
            if len(hunt.culprits) > 1:
                said = _dropped_said(hunt, sha)
                rt.say(hunt, "confirm", f"{sha[:10]} dropped: {said}")
                if said.startswith("its revert recovers ") and "nothing" not in said:
                    hunt.root_summary += f"; {sha[:10]}, a further step the bisection found, is not a cause: {said}"
        elif kept and hunt.confirmation.get("untestable"):
            # A step beside a confirmed one needs its own A/B: the bisection's "more steps?" check
            # compares samples taken minutes apart, and load moves one against the other.
            rt.say(hunt, "confirm", f"{sha[:10]} dropped: a further step that no A/B could test is not a cause")
        else:
            kept.append((sha, hunt.confirmation))
    if not kept:
        return []
    shares = _shares(hunt, kept)  # each step's own confirmation over the drop: weighed twice below
    kept = _needed(hunt, rt, _at_head(hunt, rt, kept, shares), shares)
    first = hunt.culprits[0] if hunt.culprits else kept[0][0]
    hunt.culprits = [sha for sha, _ in kept]
    hunt.root_ref, hunt.confirmation = kept[0]
    if hunt.root_ref != first:
        hunt.root_summary = f'{hunt.root_ref[:10]} "{subject_of(hunt, rt, hunt.root_ref)}"'
    return kept


def _dropped_said(hunt: Hunt, sha: str) -> str:
    """Why a further bisected step is not kept, from its revert's A/B (``hunt.confirmation``): a
    recovery beyond noise but under what a cause must recover is said with its numbers ("recovers
    nothing" was said of a 6.5 % recovery at p = 0.0006)."""
    c = hunt.confirmation
    d, p = c.get("delta_pct"), c.get("p_value")
    if d is None or p is None or p > 0.01 or (d > 0) != hunt.target.higher_is_better:
        return "its revert recovers nothing" + (f" ({d:+.1f}% with it reverted, p={p:.2g})" if d is not None else "")
    return f"its revert recovers {abs(d):.1f}% (p={p:.2g}), less than the {min_effect_pct(hunt):.2g}% a cause must"


def _at_head(
    hunt: Hunt, rt: Runtime, kept: list[tuple[str, dict]], shares: dict[str, float | None]
) -> list[tuple[str, dict]]:
    """Of several confirmed steps, those measured only where they landed (the revert conflicts at
    HEAD, or HEAD with it reverted cannot run: culprit^ vs culprit) show that a step existed there
    once, not that it is a cause at HEAD: only the largest of them stays (the drop's main step,
    which the history A/B reproduced at HEAD); a further one is said and dropped, as a step no A/B
    could test is. Found on MarkupSafe in CI (its third failure there): after the quadratic
    striptags (750e22b, 30x where it landed), a lint-only commit measured +56 % against its parent
    on CI's machine, through the heap layout the quadratic loop's time depends on (the
    environment's size alone moves it +-40 %; here the same commit is 40 % faster), and its revert
    conflicts at HEAD. Weighed by those two landings, the main step "explained" 70 % of the drop,
    so ``_needed`` kept both."""
    if len(kept) < 2 or not any(conf.get("conflict") for _sha, conf in kept):
        return kept
    largest = max(kept, key=lambda k: shares[k[0]] or 0.0) if None not in shares.values() else kept[0]
    out = []
    for sha, conf in kept:
        if conf.get("conflict") and sha != largest[0]:
            rt.say(
                hunt,
                "confirm",
                f"{sha[:10]} dropped: a further step measured only where it landed ({conf.get('why')}), "
                "so nothing shows it is a cause at HEAD",
            )
            continue
        out.append((sha, conf))
    return out


def _shares(hunt: Hunt, kept: list[tuple[str, dict]]) -> dict[str, float | None]:
    """Each confirmed step's share of the drop (``multiple.share`` of its own confirmation)."""
    return {sha: share(hunt, {"kind": "commit", "confirmation": conf}) for sha, conf in kept}


def _needed(
    hunt: Hunt, rt: Runtime, kept: list[tuple[str, dict]], shares: dict[str, float | None]
) -> list[tuple[str, dict]]:
    """The confirmed steps the drop needs: the largest share first (what reverting it alone at HEAD
    recovers), then each further one only while those kept recover less than ``EXPLAINED_PCT`` of
    the drop together. A step whose effect lives on the path another culprit made slow is real
    where it was measured but no cause of the drop: with that culprit reverted it is gone. Found on
    MarkupSafe in CI: after the quadratic striptags (750e22b, 50x), a lint-only commit moved the
    heap layout and the quadratic loop's time with it by +70 % on CI's machine (-40 % here; the
    environment's size alone moves it +-40 %), its revert at HEAD "recovered" a part of the
    drop, and it was named beside the cause. Steps without a share (no reproduced drop) all stay."""
    if len(kept) < 2 or any(shares[sha] is None for sha, _conf in kept):
        return kept
    ordered = sorted(kept, key=lambda k: -(shares[k[0]] or 0.0))
    needed, recovered = [ordered[0]], shares[ordered[0][0]] or 0.0
    for sha, conf in ordered[1:]:
        if recovered >= EXPLAINED_PCT:
            said = ", ".join(f"{s[:10]} {shares[s]:.0f}%" for s, _ in needed)
            rt.say(
                hunt,
                "confirm",
                f"{sha[:10]} dropped: a further step (its revert alone recovers {shares[sha]:.0f}% of the drop), "
                f"but the drop is explained without it ({said})",
            )
            continue
        needed.append((sha, conf))
        recovered += shares[sha] or 0.0
    order = [sha for sha, _ in kept]  # the bisection's order (oldest first) for the verdict
    return sorted(needed, key=lambda k: order.index(k[0]))


def _fresh_head(hunt: Hunt) -> Measured | None:
    """HEAD's side of the confirmation just taken, when it was HEAD vs HEAD+revert."""
    conf = hunt.confirmation or {}
    if conf.get("conflict") or conf.get("untestable") or not conf.get("evidence"):
        return None
    return next((m for m in hunt.measurements if m.id == conf["evidence"][0] and m.label == "HEAD"), None)


def _confirm_one(hunt: Hunt, rt: Runtime, head: tuple[str, Measured] | None = None) -> bool:
    """HEAD vs HEAD with ``hunt.root_ref`` reverted (or, if the revert conflicts, or a side of that
    A/B cannot be built, served or run, vs its parent). When neither A/B can be measured the
    culprit stands as bisected, not proven (``untestable``), and the fix is a person's: that is
    not a refutation, and not a crashed hunt. ``head``: the culprit confirmed before this one and
    HEAD as its confirmation measured it (``fresh_ab``'s ``known_a``)."""
    args = {"culprit": hunt.root_ref, "base": "HEAD"}
    if inert := hunt.inert_files.get(hunt.root_ref or ""):
        args["keep"] = inert  # where the revert conflicts only in files no run executes, they stay as at HEAD
    plan = rt.tool("git_prepare_revert", args, hunt=hunt)
    # After a failed confirmation, the next one takes more samples than the cached ones it failed on.
    n = hunt.budget.samples * (1 + len(hunt.rejected_culprits))
    try:
        if not plan.ok or plan.result["conflict"]:
            return _once_more(hunt, rt, lambda: _confirm_against_parent(hunt, rt, plan, n))
        try:
            return _once_more(hunt, rt, lambda: _confirm_by_revert(hunt, rt, plan, n, head))
        except ProbeError as exc:
            why = first_line(exc)  # names the state that failed
            return _once_more(hunt, rt, lambda: _confirm_against_parent(hunt, rt, plan, n, why=why))
    except ProbeError as exc:
        why = first_line(exc)
        text = f"no A/B could be measured ({why}): the culprit stands as bisected, not proven"
        hunt.confirmation = {"ok": True, "untestable": True, "text": text, "why": why, "evidence": []}
        rt.say(hunt, "confirm", f"NOT tested: {text}")
        return True  # kept, as likely: nothing refuted it


def _once_more(hunt: Hunt, rt: Runtime, ab: Callable[[], bool]) -> bool:
    """An A/B, taken afresh once more if a run failed for a reason that is not its state's own (a
    run that outlasted its timeout twice on a busy host, GPUs taken by another process): a state
    that does not build or serve (``StateFailure``) fails the same way again and is not retried."""
    try:
        return ab()
    except ProbeError as exc:
        if isinstance(exc, StateFailure) and exc.final:
            raise
        rt.say(hunt, "confirm", f"the A/B could not be measured ({first_line(exc)}): once more, afresh")
        return ab()


def _confirm_by_revert(hunt: Hunt, rt: Runtime, plan, n: int, before: tuple[str, Measured] | None = None) -> bool:
    revert = plan.result["revert_sha"]
    known = before[1] if before else None
    cmp, head, fixed = fresh_ab(hunt, rt, ("HEAD", "HEAD"), ("HEAD+revert", revert), n, known_a=known)
    ok = explains(hunt, cmp, fixed, head)
    text = kept_said(plan.result) + fmt(cmp, head, fixed, hunt.target.metric) + freshness(head, fixed)
    if before and head.id == before[1].id:
        text += f" (HEAD's launch the one of {before[0][:10]}'s confirmation: one experiment)"
    return record_confirmation(hunt, rt, ok, cmp, text, [head.id, fixed.id], revert_sha=revert, plan=plan.result)


def kept_said(plan: dict, end: str = ": ") -> str:
    """What a partial revert left out, said before its A/B (empty for a whole revert)."""
    kept = plan.get("kept") or []
    if not kept:
        return ""
    said = f"the revert conflicts in {files_said(kept)}, which no run executes: kept as at HEAD"
    code = [f for f in kept if f.endswith(".py")]
    if code and not end:  # the proposal: code kept at HEAD may hold tests of what the revert undoes
        said += f" (run the project's tests: {', '.join(code[:2])} may test the reverted change)"
    return said + end


def _confirm_against_parent(hunt: Hunt, rt: Runtime, plan, n: int, why: str | None = None) -> bool:
    """The revert cannot be made (later commits changed the same lines), or its A/B cannot be
    measured (a side does not build, serve or run): prove the culprit by an A/B against its own
    parent instead; the fix is then a person's, not a prepared commit."""
    why = why or conflicts_said(plan)
    ref = hunt.root_ref or ""
    cmp, parent, culprit = fresh_ab(hunt, rt, ("culprit^", f"{ref}^"), ("culprit", ref), n)
    ok = explains(hunt, cmp, parent, culprit)
    text = f"{why}; instead: " + fmt(cmp, parent, culprit, hunt.target.metric) + freshness(parent, culprit)
    return record_confirmation(hunt, rt, ok, cmp, text, [parent.id, culprit.id], why=why, conflict=True)
