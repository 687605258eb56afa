"""The broken-server kind: HEAD (the working tree as it is) does not serve at all.

On a real node this is as common as a slowdown: a commit that crashes the scheduler on the first
request, an NCCL deadlock that leaves every request waiting until a watchdog kills the server.
The alert then says throughput 0 or timeouts, and there is no number to bisect on. A careful
engineer says so ("HEAD does not serve: NameError ... (scheduler.py:135)") and hunts the change
that broke it with the question "does it serve?", which one probe per state answers:

- what to suspect: the uncommitted changes (does HEAD without them serve?) and the commits since
  the last known-good point (does that point serve?);
- how to localize: bisection between "serves" and "broken" (``tools.bisect.bisect_broken``);
  commits that do not build are skipped, never blamed;
- how to confirm: a fresh launch of HEAD with the culprit reverted serves (or, when the revert
  conflicts, the culprit's parent serves and the culprit does not);
- what to propose: the revert, approved like any other.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.experiments import conflicts_said
from agent.runtime import Runtime
from agent.state import Hunt, Hypothesis
from tools.bisect import ProbeError, bisect_broken
from tools.git import WORKTREE_PREFIX
from tools.measure import NOT_HEALTHY, BrokenState
from tools.text import seconds


def reproduce(hunt: Hunt, rt: Runtime, exc: BrokenState) -> None:
    """The working tree does not serve: record how, from its log, and hunt that instead."""
    hunt.head_broken = f"{exc.how}: {exc.failure or 'no error in the log'}"
    t = hunt.target
    hunt.regression = {"metric": t.metric, "good": t.good_value, "bad": None, "broken": hunt.head_broken}
    rt.say(hunt, "reproduce", f"HEAD does not serve ({hunt.head_broken}); hunting the change that broke it")


def restate(hunt: Hunt) -> None:
    """Turn the ledger's uncommitted and history hypotheses into their broken-server form."""
    for h in hunt.hypotheses:
        if h.category == "uncommitted":
            h.statement = f"the uncommitted change to {h.subject} breaks the server"
            h.test = "launch HEAD without the uncommitted changes: does it serve?"
        elif h.category == "history":
            h.statement = f"a commit since {(h.subject or '')[:10]} breaks the server"
            h.test = f"launch {(h.subject or '')[:10]}: does it serve? then bisection: serves vs broken"


def serves(hunt: Hunt, rt: Runtime, label: str, ref: str, paths: list[str] | None = None) -> bool | None:
    """Does the state serve? True with its samples, False when it does not start, crashes or
    hangs, None when it cannot be tested (it does not build)."""
    try:
        rt.measure(hunt, label, ref, samples=hunt.budget.samples if ref != "WORKTREE" else 1, paths=paths)
    except BrokenState:
        return False
    except ProbeError:
        return None
    return True


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == h.category and x.status == "open"] or [h]
    if h.category == "uncommitted":
        ok = serves(hunt, rt, "HEAD", "HEAD")
        verdict = {True: "supported", False: "refuted", None: "inconclusive"}[ok]
        why = {
            True: "HEAD without the uncommitted changes serves",
            False: "HEAD does not serve either: the uncommitted changes are not what broke it",
            None: "HEAD could not be built",
        }[ok]
        for g in group:
            g.status, g.reason = verdict, why
        if ok:
            _localize_patches(hunt, rt, group)
    elif h.category == "history":
        ok = serves(hunt, rt, "good-candidate", h.subject or "")
        h.status = {True: "supported", False: "refuted", None: "inconclusive"}[ok]
        h.reason = {
            True: f"{(h.subject or '')[:10]} serves; HEAD does not ({hunt.head_broken})",
            False: f"{(h.subject or '')[:10]} does not serve either: "
            + (_alike_said(hunt) or "the break is older than the range"),
            None: f"{(h.subject or '')[:10]} could not be built",
        }[ok]
    else:  # hardware, environment, config: not what a crash on a request is about
        for g in group:
            g.status, g.reason = "inconclusive", "not tested: HEAD does not serve"


def _localize_patches(hunt: Hunt, rt: Runtime, group: list[Hypothesis]) -> None:
    """Halve the uncommitted files: HEAD plus one half either serves (the break is in the other)
    or does not (it is in this one)."""
    suspects = list(group)
    while len(suspects) > 1:
        half, rest = suspects[: len(suspects) // 2], suspects[len(suspects) // 2 :]
        paths = [x.subject for x in half if x.subject]
        ok = serves(hunt, rt, f"HEAD+{len(paths)} patch(es)", "WORKTREE", paths=paths)
        cleared, suspects = (half, rest) if ok else (rest, half)
        for x in cleared:
            x.status, x.reason = "refuted", f"HEAD plus [{', '.join(paths)}] " + ("serves" if ok else "does not serve")


def _failure_of(entry: dict) -> str:
    """A state's failure without what differs from commit to commit for one and the same error:
    its scratch worktree's path and the line it was raised at."""
    said = re.sub(rf"\S*{re.escape(Path(WORKTREE_PREFIX).name)}[^/\s]+/", "", entry.get("failure") or "")
    return re.sub(r" \([\w.]+:\d+\)$", "", said).strip()


def _alike_said(hunt: Hunt) -> str:
    """Where the known-good commit fails as HEAD does, with the same error, the launch command or
    the host is the first suspect, not a commit (a trial's wrong --model path failed both ends
    with one HFValidationError and read "the break is older than the range"). "" otherwise."""
    failures = {_failure_of(b) for b in hunt.broken if not b["how"].startswith(NOT_HEALTHY)}
    if len(hunt.broken) < 2 or len(failures) != 1 or not next(iter(failures)):
        return ""
    logs = [b["log"] for b in hunt.broken if b.get("log")]
    where = f" (the log: {logs[-1]})" if logs else ""
    return (
        f"it fails as HEAD does ({next(iter(failures))[:200]}): the launch command or the host's environment "
        f"is the likely cause, not a commit{where}"
    )


def _timeout_said(hunt: Hunt) -> str:
    """Where every state failed by waiting out the launch timeout, the timeout is the first
    suspect, not the code: a trial's --launch-timeout 0.01 read "HEAD does not serve (does not
    become healthy within 0 s ...); no known-good state serves either"."""
    if not hunt.broken or not all(b["how"].startswith(NOT_HEALTHY) for b in hunt.broken):
        return ""
    return (
        f"; each state waited out the launch timeout ({seconds(hunt.target.launch_timeout_s)} s) alike: "
        "is --launch-timeout long enough for a launch on this host?"
    )


def localize(hunt: Hunt, rt: Runtime, subject_of) -> None:
    """Name the change that broke serving."""
    sup = [h for h in hunt.hypotheses if h.status == "supported"]
    history = next((h for h in sup if h.category == "history"), None)
    patches = [h for h in sup if h.category == "uncommitted"]
    if patches:
        hunt.root_kind, hunt.root_ref = "uncommitted", ", ".join(h.subject or "" for h in patches)
        hunt.root_summary = f"the uncommitted change to {hunt.root_ref} breaks the server ({hunt.head_broken})"
        return
    if history is None:
        hunt.status = "inconclusive"
        hunt.root_summary = f"HEAD does not serve ({hunt.head_broken}); no known-good state serves either" + (
            f"; {alike}" if (alike := _alike_said(hunt)) else _timeout_said(hunt)
        )
        return
    good, head = rt.resolve(hunt, history.subject or ""), rt.resolve(hunt, "HEAD")
    parents = rt.rev_list(hunt, good, head)
    rt.say(hunt, "localize", f"bisecting {len(parents)} commits {good[:10]}..{head[:10]}: serves vs broken")
    res = bisect_broken(parents, good, head, lambda sha: serves(hunt, rt, f"bisect {sha[:8]}", sha))
    if res.culprit is None:
        hunt.status = "inconclusive"
        hunt.root_summary = f"HEAD does not serve ({hunt.head_broken}); the bisection found no first broken commit"
        return
    hunt.culprits = [res.culprit]
    subject = subject_of(hunt, rt, res.culprit)
    hunt.root_kind, hunt.root_ref = "commit", res.culprit
    where = "" if len(res.suspects) == 1 else f" (or one of {len(res.suspects) - 1} untestable commits before it)"
    hunt.root_summary = f'{res.culprit[:10]} "{subject}" breaks the server{where}: {hunt.head_broken}'
    history.reason += (
        f"; bisection (serves vs broken): {len(parents)} commits, {res.probes} probes, "
        f"{len(res.skipped)} untestable -> {res.culprit[:10]}"
    )
    rt.say(hunt, "localize", f"first broken commit {hunt.root_summary}")


def confirm(hunt: Hunt, rt: Runtime, record) -> bool:
    """A fresh launch of HEAD with the culprit reverted must serve; if the revert conflicts, the
    culprit's parent must serve and the culprit must not."""
    if hunt.root_kind != "commit":
        return True  # the patch halving already launched each side
    ref = hunt.root_ref or ""
    plan = rt.tool("git_prepare_revert", {"culprit": ref, "base": "HEAD"}, hunt=hunt)
    if plan.ok and not plan.result["conflict"]:
        revert = plan.result["revert_sha"]
        ok = serves(hunt, rt, "HEAD+revert", revert)
        fixed = next((m for m in reversed(hunt.measurements) if m.label == "HEAD+revert"), None)
        text = (
            f"HEAD+revert serves: {fixed.median:.4g} {hunt.target.metric} over {len(fixed.samples)} samples; "
            f"HEAD does not ({hunt.head_broken})"
            if ok and fixed
            else f"HEAD+revert does not serve either ({'untestable' if ok is None else 'broken'})"
        )
        return record(hunt, rt, bool(ok), text, [fixed.id] if fixed else [], revert_sha=revert, plan=plan.result)
    why = conflicts_said(plan)
    parent_ok = serves(hunt, rt, "culprit^", f"{ref}^")
    culprit_ok = serves(hunt, rt, "culprit", ref)
    ok = parent_ok is True and culprit_ok is False
    text = f"{why}; instead: culprit^ {'serves' if parent_ok else 'does not serve'}, culprit " + (
        "does not serve" if culprit_ok is False else "serves"
    )
    return record(hunt, rt, ok, text, [], why=why, conflict=True)
