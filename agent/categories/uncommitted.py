"""Uncommitted changes: a patch in the working tree slows it.

Suspected: every staged, unstaged or untracked path whose change could alter what runs (not
comments and formatting alone, documentation or CI settings: ``tools.codepath.inert_changes``); a
patch under a backend the server's log says is not in use is demoted (not on the executed path).
Tested by one A/B for all of them (HEAD vs the working tree, or the environment's clean A/B);
localized by halving (HEAD plus half of the patches, as a snapshot commit). Fix: discard the
change (a person approves it).
"""

from __future__ import annotations

from agent.experiments import ab, explains, fmt, halve, set_verdict, under_said
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis, Measured
from tools.codepath import entry_modules

NAME = "uncommitted"

CODE_PATHS = {
    "flashinfer": ("attention_backend", "flashinfer"),
    "triton_backend": ("attention_backend", "triton"),
    "eagle": ("speculative_algorithm", "EAGLE"),
    "cutlass": ("moe_runner_backend", "cutlass"),
}


def changed_files(hunt: Hunt, rt: Runtime) -> list[str]:
    """Every path with uncommitted work: staged, unstaged or untracked (none if git fails)."""
    return sorted(_status(hunt, rt)[0])


def _status(hunt: Hunt, rt: Runtime) -> tuple[set[str], dict[str, str]]:
    """The paths with uncommitted work, and those of them whose change cannot alter what runs
    (``tools.codepath.inert_changes``), less any the benchmark command names (its input)."""
    status = rt.tool("git_status", {}, hunt=hunt)
    if not status.ok:
        return set(), {}
    r = status.result
    named = entry_modules(hunt.target.command)[1] if hunt.target.command else set()
    inert = {p: why for p, why in (r.get("inert") or {}).items() if p not in named}
    return set(r["staged"] + r["unstaged"] + r["untracked"]), inert


def server_args(hunt: Hunt, rt: Runtime) -> dict[str, str]:
    """The server args from the log of the reproduce run (what is actually executed)."""
    return rt.server_args(hunt, "now")


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    changed, inert = _status(hunt, rt)
    if inert:  # a change that cannot alter what runs is no suspect: evidence first
        listed = "; ".join(f"{p} ({why})" for p, why in sorted(inert.items())[:4])
        more = f"; {len(inert) - 4} more" if len(inert) > 4 else ""
        rt.say(hunt, "plan", f"uncommitted: {len(inert)} path(s) whose change cannot alter what runs: {listed}{more}")
    changed = sorted(changed - set(inert))
    args = server_args(hunt, rt) if changed else {}
    for path in changed:
        h = add(NAME, f"the uncommitted change to {path} slows it", "A/B: HEAD vs the working tree", path)
        for word, (arg, value) in CODE_PATHS.items():
            if word in path.lower() and arg in args and value.lower() not in args[arg].lower():
                h.reason = f"not on the executed path: the server runs {arg}='{args[arg]}'"


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    group = [x for x in hunt.hypotheses if x.category == "uncommitted" and x.status == "open"]
    now = hunt.get(hunt.reproduced)  # type: ignore[arg-type]
    head = rt.planned(hunt, "HEAD", "HEAD")
    cmp, head, now = ab(hunt, rt, head, now, "HEAD", "now", better="a")
    text = fmt(cmp, head, now, hunt.target.metric)
    if explains(hunt, cmp, head, now):
        set_verdict(group, "supported", text, [head.id, now.id])
        if len(group) > 1:
            _localize_patch(hunt, rt, group, head, now)
    else:
        set_verdict(group, "refuted", text + under_said(hunt, cmp, head, now), [head.id, now.id])


def _localize_patch(hunt: Hunt, rt: Runtime, group: list[Hypothesis], head: Measured, now: Measured) -> None:
    """Halve the changed files: HEAD plus half of them (a snapshot commit) vs HEAD, until one is left.
    A half reproduces the slowdown only if it is measurably slower than HEAD *and* carries at
    least half of the whole working tree's drop: a 2 % wobble is not the 24 % being hunted.
    Files on a path the server does not execute go last, so they are tested last."""
    full = now.median - head.median
    suspects = sorted(group, key=lambda x: "not on the executed path" in x.reason)

    def state_for(half: list[Hypothesis]) -> Measured:
        paths = [x.subject for x in half if x.subject]
        return rt.planned(hunt, f"HEAD+{len(paths)} patch(es)", "WORKTREE", paths=paths)

    def words(half: list[Hypothesis], moved: bool, numbers: str) -> str:
        paths = ", ".join(x.subject for x in half if x.subject)
        if moved:
            return f"localization: HEAD plus only [{paths}] already reproduces the slowdown ({numbers})"
        return f"localization: HEAD plus this change (with [{paths}]) is as fast as HEAD ({numbers})"

    suspects, head, _alone = halve(hunt, rt, suspects, head, "HEAD", full, state_for, words, top=now)
    rt.say(hunt, "localize", f"the uncommitted change that matters: {suspects[0].subject}")


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    paths = [h.subject or "" for h in sup if h.category == NAME]
    hunt.root_kind, hunt.root_ref = "uncommitted", paths[0] if len(paths) == 1 else ", ".join(paths)
    hunt.root_summary = (
        f"the uncommitted change to {paths[0]} makes it slower than HEAD"
        if len(paths) == 1
        else f"the uncommitted changes ({len(paths)} files) make it slower than HEAD"
    )


def action(hunt: Hunt) -> Action:
    return Action(kind="restore", ref=hunt.root_ref, detail=f"discard the uncommitted change to {hunt.root_ref}")
