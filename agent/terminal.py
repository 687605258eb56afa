"""The report as a person reads it in a terminal: headings, tables, verdicts in colour, the command
to approve highlighted. In a pipe or a file the report stays plain Markdown (``agent.report``),
written as it is, so no row is wrapped at the terminal's width; ``--json`` is the verdict.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from agent import evidence
from agent.grouped import for_screen, group_hypotheses, short_reason
from agent.report import asks_for_decision, confirmation_what, cost_said, pruned_said, screen_number_rows
from agent.state import Hunt

TERMINAL_REASON = 200  # characters of a hypothesis's evidence in a terminal (report.md: 360)
TERMINAL_COVERS = 3  # members a grouped row names in a terminal before it counts the rest

STATUS_STYLE = {
    "awaiting_approval": "bold yellow",
    "concluded": "bold green",
    "inconclusive": "bold red",
    "failed": "bold red",
    "running": "bold cyan",
}
VERDICT_STYLE = {
    "supported": "bold green",
    "refuted": "red",
    "demoted": "dim",
    "inconclusive": "yellow",
    "open": "cyan",
}


def _status(hunt: Hunt) -> Text:
    return Text(hunt.status.replace("_", " "), style=STATUS_STYLE.get(hunt.status, "bold"))


def report_view(hunt: Hunt, approve_hint: str | None = None) -> RenderableType:
    """Everything the Markdown report says above its timeline, as Rich renderables."""
    t = hunt.target
    parts: list[RenderableType] = [Rule(f"perf-sleuth run {hunt.run_id}")]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("Status", _status(hunt))
    head.add_row("Target", Text(t.repo + (f" on {t.host}" if t.host else "")))
    head.add_row("Alert", Text(t.summary or "-"))
    policy = hunt.policy + (f" ({hunt.model})" if hunt.model else "")
    head.add_row("Policy", Text(policy))
    parts += [head, Text("")]

    root = Text()
    if hunt.root_kind:
        root.append(hunt.root_kind, style="bold magenta")
        root.append(f" {hunt.root_ref or ''}\n", style="bold")
        root.append(hunt.root_summary)
    else:
        root.append(hunt.root_summary or hunt.error or "not found")
    if hunt.confirmation.get("text"):
        root.append(f"\nConfirmation A/B{confirmation_what(hunt)}: ", style="bold")
        root.append(hunt.confirmation["text"])
    if drift := evidence.drifted(hunt):
        root.append("\nCaution: ", style="bold yellow")
        root.append(drift)
    parts.append(Panel(root, title="Root cause", title_align="left"))

    numbers = Table(title="Numbers", title_justify="left", show_edge=False)
    for col in ("state", f"median {t.metric}", "95% interval", "samples"):
        numbers.add_column(col, justify="left" if col == "state" else "right")
    for state, ref, *rest in screen_number_rows(hunt):
        numbers.add_row(state + (f" ({ref})" if ref else ""), *rest)
    parts += [numbers, Text("")]

    hyps = Table(title="Hypotheses", title_justify="left", show_edge=False, expand=True)
    hyps.add_column("id", no_wrap=True)
    hyps.add_column("category")
    hyps.add_column("statement", ratio=2)
    hyps.add_column("verdict", no_wrap=True)
    hyps.add_column("evidence", ratio=3)
    for g in for_screen(group_hypotheses(hunt.hypotheses)):
        # A terminal's columns are narrow: each cell shorter than report.md's, so the report stays
        # near one screen (the seed's, 100 columns wide: a grouped row listed ten paths a line each,
        # and one history row's evidence took 17 lines).
        statement = g.statement + (": " + g.covers_text(TERMINAL_COVERS) if len(g.ids) > 1 else "")
        reason = short_reason(g.reason, TERMINAL_REASON)
        hyps.add_row(g.id, g.category, statement, Text(g.status, style=VERDICT_STYLE.get(g.status, "")), reason)
    parts += [hyps if hunt.hypotheses else Text("Hypotheses: none stated"), Text("")]

    a = hunt.action
    action = Text()
    if a is None or a.kind == "none":
        action.append("none")
    else:
        action.append(a.kind, style="bold")
        action.append((f" {a.ref}" if a.ref else "") + f": {a.detail} - ")
        action.append(a.status_said, style="bold yellow" if a.status == "pending" else "bold green")
        if a.status == "applied" and a.branch:
            action.append(f" (branch {a.branch})")
        if a.status != "pending" and a.reason:
            action.append(f': "{a.reason}"')
    parts.append(Panel(action, title="Proposed action", title_align="left"))
    if approve_hint and asks_for_decision(hunt):
        cmds = Text()
        cmds.append("approve: ", style="bold")
        cmds.append(approve_hint, style="bold black on yellow")
        cmds.append("\nreject:  ", style="bold")
        cmds.append(f"{approve_hint.replace(' approve ', ' reject ')} --reason '...'")
        parts.append(cmds)
    if hunt.broken:
        broken = Table(title="States that did not build, serve or run", title_justify="left", show_edge=False)
        for col in ("state", "ref", "what happened", "the first error"):
            broken.add_column(col)
        for b in hunt.broken:
            broken.add_row(b["label"], b["ref"], b["how"], b.get("failure") or "-")
        parts.append(broken)
    if hunt.pruned:
        parts.append(Text(pruned_said(hunt)))
    said = f"States measured: {hunt.probes} (--max-probes {hunt.budget.max_probes}). Cost: {cost_said(hunt)}."
    parts.append(Text(said, style="dim"))
    return Group(*parts)
