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
    flags_now, flags_good = set(shlex.split(t.launch)), set(shlex.split(t.good_launch or ""))
    diff = sorted(f for f in (flags_now ^ flags_good) if f.startswith("--"))
    h.subject = diff[0] if diff else "flags"
    set_verdict([h], verdict_of(hunt, cmp, old, cur), text + under_said(hunt, cmp, old, cur), [old.id, cur.id])


def name(hunt: Hunt, rt: Runtime, sup: list[Hypothesis]) -> None:
    h = next(x for x in sup if x.category == NAME)
    hunt.root_kind, hunt.root_ref = "config", h.subject
    hunt.root_summary = f"launch flag {h.subject} changed since the good run"


def action(hunt: Hunt) -> Action:
    return Action(kind="restore", ref=hunt.root_ref, detail=f"launch with the good flags ({hunt.root_ref})")
