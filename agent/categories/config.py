"""Config: a launch flag changed since the good run.

Suspected when the alert gives the good run's launch and it differs from the current one; tested
by an A/B of the two launches at HEAD. Fix: launch with the good flags.
"""

from __future__ import annotations

import shlex

from agent.experiments import ab, fmt, set_verdict, under_said, verdict_of
from agent.runtime import Runtime
from agent.state import Action, Hunt, Hypothesis

NAME = "config"


def suspect(hunt: Hunt, rt: Runtime, add) -> None:
    if hunt.target.good_launch and hunt.target.good_launch != hunt.target.launch:
        add(NAME, "a launch flag changed since the good run", "A/B: the good launch vs the current one")


def test(hunt: Hunt, rt: Runtime, h: Hypothesis) -> None:
    t = hunt.target
    cur = rt.planned(hunt, "launch-now", "HEAD")
    old = rt.planned(hunt, "launch-good", "HEAD", launch=t.good_launch)
    cmp, old, cur = ab(hunt, rt, old, cur, "launch-good", "launch-now", better="a")
    text = fmt(cmp, old, cur, t.metric)
    changed = flag_changes(t.good_launch or "", t.launch)
    h.subject = changed[0][0] if changed else "flags"
    set_verdict([h], verdict_of(hunt, cmp, old, cur), text + under_said(hunt, cmp, old, cur), [old.id, cur.id])


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    h = next(x for x in sup if x.category == NAME)
    hunt.root_kind, hunt.root_ref = "config", h.subject
    hunt.root_summary = f"launch flag {h.subject} changed since the good run"


def action(hunt: Hunt) -> Action:
    """What a person does by hand: each flag to drop, add back or set back, then the good launch
    itself. It said "launch with the good flags (--disable-cuda-graph)" for a flag to drop, which
    reads as one to add."""
    t = hunt.target
    said = "; ".join(what for _flag, what in flag_changes(t.good_launch or "", t.launch)) or "the flags differ"
    return Action(kind="restore", ref=hunt.root_ref, detail=f"{said} (the good run's launch: `{t.good_launch}`)")


def launch_flags(command: str) -> dict[str, str | None]:
    """A launch command's ``--flags`` and their values (``--x 3``, ``--x=3``; None: a switch)."""
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: word by word
        words = command.split()
    flags: dict[str, str | None] = {}
    for i, w in enumerate(words):
        if not w.startswith("--") or w == "--":
            continue
        name, eq, value = w.partition("=")
        nxt = words[i + 1] if i + 1 < len(words) else None
        flags[name] = value if eq else (nxt if nxt is not None and not nxt.startswith("--") else None)
    return flags


def flag_changes(good: str, now: str) -> list[tuple[str, str]]:
    """Each flag that differs between the good launch and the current one, with what restores it."""
    g, n = launch_flags(good), launch_flags(now)
    out = []
    for flag in sorted(g.keys() | n.keys()):
        if flag not in g:
            out.append((flag, f"drop {flag}{' ' + n[flag] if n[flag] else ''}"))
        elif flag not in n:
            out.append((flag, f"add back {flag}{' ' + g[flag] if g[flag] else ''}"))
        elif g[flag] != n[flag]:
            out.append((flag, f"set {flag} back to {g[flag] if g[flag] is not None else 'a switch'} (now {n[flag]})"))
    return out
