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
    ab,
    explains,
    fmt,
    fresh_ab,
    freshness,
    record_confirmation,
    set_verdict,
    verdict_of,
)
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis
from tools.bisect import BisectConfig, BisectResult, ProbeError, bisect
from tools.measure import StateFailure
from tools.text import first_line

NAME = "history"


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    """The alert's good ref, else the HEAD before the last pull, reset, merge, rebase or checkout."""
    candidate, how = hunt.target.good_ref, "the alert's good ref"
    reflog = rt.tool("git_reflog", {"limit": 50}, hunt=hunt) if candidate is None else None
    if candidate is None and reflog is not None and reflog.ok and (e := last_move(reflog.result["entries"])):
        candidate, how = e["old_sha"], f"HEAD before '{e['action']}' ({e['time']})"
    if candidate:
        hunt.good_candidate = rt.resolve(hunt, candidate)
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
    """The known-good commit vs HEAD, both under the bisection's environment (``probe_env``)."""
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
        text += f"; measured with the clean A/B in one experiment ({len(good.groups) + len(head.groups)} launches)"
    if env:
        text += f"; both with {', '.join(sorted(env))} blanked (they change nothing: see the clean A/B)"
    status = verdict_of(hunt, cmp, good, head)
    set_verdict([h], status, text, [good.id, head.id])


def ends_refresh(hunt: Hunt) -> int:
    """Fresh samples of each end beside every probe (``BisectConfig.ref_refresh``): one where a
    sample costs no launch (a benchmark command); none where each would be a server launch."""
    return 1 if hunt.target.command else 0


def bisect_history(hunt: Hunt, rt: Runtime, good_ref: str, bad_ref: str) -> tuple[list[str], BisectResult]:
    """Bisect good..bad with the hunt's probes (budgeted, recorded); the culprits land in
    ``hunt.culprits`` and every probed commit's samples in its measurements."""
    good, head = rt.resolve(hunt, good_ref), rt.resolve(hunt, bad_ref)
    hunt.good_candidate = hunt.good_candidate or good
    parents = rt.rev_list(hunt, good, head)
    hunt.bisected = list(reversed(list(parents)))  # rev-list is newest first (topological)
    no_ops = _prune(hunt, rt, good, head, parents)
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
        BisectConfig(
            higher_is_better=hunt.target.higher_is_better,
            verify=bool(hunt.rejected_culprits),
            known_ref_samples=_known_samples(hunt, good, head, rt.probe_state(hunt, head).launch),
            no_ops=no_ops,
            ref_refresh=ends_refresh(hunt),
        ),
    )
    known = {m.ref for m in hunt.measurements}
    for sha, got in seen.items():
        if sha not in known:
            rt.record_samples(hunt, f"bisect {sha[:8]}", sha, got)
    hunt.culprits = [c.sha for c in res.culprits]
    return parents, res


def _prune(hunt: Hunt, rt: Runtime, good: str, head: str, parents: dict[str, list[str]]) -> list[str]:
    """The commits of the range that touch no file the workload executes (``tools.codepath``):
    the bisection neither probes nor blames them. Listed on the hunt with the reason."""
    paths = rt.code_paths(hunt, good, head)
    if not paths["traced"]:
        rt.say(hunt, "localize", f"no code-path pruning: {paths['why']}")
        return []
    pruned = [c for c in paths["commits"] if c["pruned"] and c["sha"] in parents]
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


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    """Bisect the range and name the first culprit (its subject), with the bisection's numbers."""
    h = next(x for x in sup if x.category == NAME)
    parents, res = bisect_history(hunt, rt, hunt.good_candidate, "HEAD")  # type: ignore[arg-type]
    subject = subject_of(hunt, rt, hunt.culprits[0])
    hunt.root_kind, hunt.root_ref = "commit", hunt.culprits[0]
    hunt.root_summary = f'{hunt.culprits[0][:10]} "{subject}"'
    pruned = f" ({len(hunt.pruned)} pruned: no executed file)" if hunt.pruned else ""
    h.reason += (
        f"; bisection: {len(parents)} commits{pruned}, {res.probes} probes, {res.samples} samples -> "
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
    return Action(
        kind="revert",
        ref=ref,
        revert_sha=hunt.confirmation.get("revert_sha"),
        branch=f"sleuth/revert-{(ref or '')[:10]}",
        detail=f"revert {ref} on a new branch (the prepared revert commit)",
    )


def confirm(hunt: Hunt, rt: Runtime) -> bool:
    """Each of ``hunt.culprits`` against its revert; the first kept becomes ``hunt.root_ref``."""
    kept: list[tuple[str, dict]] = []
    for sha in list(dict.fromkeys(hunt.culprits or [hunt.root_ref or ""])):
        hunt.root_ref = sha
        if _confirm_one(hunt, rt):
            kept.append((sha, hunt.confirmation))
        elif len(hunt.culprits) > 1:
            rt.say(hunt, "confirm", f"{sha[:10]} dropped: its revert recovers nothing")
    if not kept:
        return False
    first = hunt.culprits[0] if hunt.culprits else kept[0][0]
    hunt.culprits = [sha for sha, _ in kept]
    hunt.root_ref, hunt.confirmation = kept[0]
    if hunt.root_ref != first:
        hunt.root_summary = f'{hunt.root_ref[:10]} "{subject_of(hunt, rt, hunt.root_ref)}"'
    return True


def _confirm_one(hunt: Hunt, rt: Runtime) -> bool:
    """HEAD vs HEAD with ``hunt.root_ref`` reverted (or, if the revert conflicts, or a side of that
    A/B cannot be built, served or run, vs its parent). When neither A/B can be measured the
    culprit stands as bisected, not proven (``untestable``), and the fix is a person's: that is
    not a refutation, and not a crashed hunt."""
    plan = rt.tool("git_prepare_revert", {"culprit": hunt.root_ref, "base": "HEAD"}, hunt=hunt)
    # After a failed confirmation, the next one takes more samples than the cached ones it failed on.
    n = hunt.budget.samples * (1 + len(hunt.rejected_culprits))
    try:
        if not plan.ok or plan.result["conflict"]:
            return _once_more(hunt, rt, lambda: _confirm_against_parent(hunt, rt, plan, n))
        try:
            return _once_more(hunt, rt, lambda: _confirm_by_revert(hunt, rt, plan, n))
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
        if isinstance(exc, StateFailure):
            raise
        rt.say(hunt, "confirm", f"the A/B could not be measured ({first_line(exc)}): once more, afresh")
        return ab()


def _confirm_by_revert(hunt: Hunt, rt: Runtime, plan, n: int) -> bool:
    revert = plan.result["revert_sha"]
    cmp, head, fixed = fresh_ab(hunt, rt, ("HEAD", "HEAD"), ("HEAD+revert", revert), n)
    ok = explains(hunt, cmp, fixed, head)
    text = fmt(cmp, head, fixed, hunt.target.metric) + freshness(head, fixed)
    return record_confirmation(hunt, rt, ok, cmp, text, [head.id, fixed.id], revert_sha=revert, plan=plan.result)


def _confirm_against_parent(hunt: Hunt, rt: Runtime, plan, n: int, why: str | None = None) -> bool:
    """The revert cannot be made (later commits changed the same lines), or its A/B cannot be
    measured (a side does not build, serve or run): prove the culprit by an A/B against its own
    parent instead; the fix is then a person's, not a prepared commit."""
    why = why or plan.error or f"the revert conflicts in {', '.join(plan.result['conflicting_files'])}"
    ref = hunt.root_ref or ""
    cmp, parent, culprit = fresh_ab(hunt, rt, ("culprit^", f"{ref}^"), ("culprit", ref), n)
    ok = explains(hunt, cmp, parent, culprit)
    text = f"{why}; instead: " + fmt(cmp, parent, culprit, hunt.target.metric) + freshness(parent, culprit)
    return record_confirmation(hunt, rt, ok, cmp, text, [parent.id, culprit.id], why=why, conflict=True)
