"""The service's HTML: server-rendered (Jinja2, autoescaped), a little JavaScript only where a
page must act (the approval buttons) or follow a run that is still moving (a reload while it runs).
"""

from __future__ import annotations

import time
from functools import cache

from jinja2 import Environment, PackageLoader, select_autoescape

from agent.grouped import for_screen, group_hypotheses
from agent.state import Action

LIVE = ("queued", "running", "applying", "rejecting")


@cache
def _env() -> Environment:
    env = Environment(loader=PackageLoader("agent.serve", "templates"), autoescape=select_autoescape(["html"]))
    env.filters["when"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"
    env.filters["short"] = lambda ref: (ref or "")[:10]
    env.filters["status_said"] = lambda action: Action(kind=action["kind"], status=action["status"]).status_said
    return env


def runs_page(rows: list[dict]) -> str:
    return _env().get_template("runs.html").render(runs=rows, live=any(r["status"] in LIVE for r in rows))


def run_page(run: dict, report: str | None) -> str:
    verdict = run.get("verdict") or {}
    hyps = run.get("hypotheses") or []
    # A finished run's "open" hypothesis was left untested on purpose (its reason says why).
    current = next((h for h in hyps if h.get("status") == "open"), None) if run.get("status") in LIVE else None
    return (
        _env()
        .get_template("run.html")
        .render(
            run=run,
            verdict=verdict,
            action=verdict.get("proposed_action"),
            after=verdict.get("after"),
            regression=verdict.get("regression") or {},
            current=current,
            groups=for_screen(group_hypotheses(hyps)),
            report=report,
            live=run["status"] in LIVE,
        )
    )
