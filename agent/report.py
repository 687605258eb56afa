"""The end of a hunt: the verdict (DESIGN.md's JSON contract), a Markdown report and a PNG plot."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from agent import evidence
from agent.grouped import for_screen, group_hypotheses
from agent.plot import plot
from agent.state import Hunt
from agent.verdict import Verdict
from tools.git import DiffStat
from tools.measure import Cost
from tools.text import fenced


def verdict(hunt: Hunt) -> dict:
    """The verdict of DESIGN.md (fields added: target, demoted, reason, culprits, after, error,
    proposed_action.branch/.revert_sha/.detail, policy, llm: model, turns and tokens; cost:
    launches, samples, device_s, build_s; broken: the states that did not build, serve or run their benchmark; pruned:
    the commits the bisection left out because they touch no file the workload executes; undone:
    steps a later commit reverted, history rather than the cause at HEAD;
    root_cause.evidence / p_value / p_corrected / tests and shape: ``agent.evidence``)."""
    hyps = []
    for h in hunt.hypotheses:
        hyps.append(
            {
                "id": h.id,
                "category": h.category,
                "statement": h.statement,
                "status": {"demoted": "refuted", "untested": "open"}.get(h.status, h.status),
                "demoted": h.status == "demoted",
                "reason": h.reason,
                "evidence": h.evidence,
            }
        )
    root = None
    if hunt.root_kind is not None:
        root = {"kind": hunt.root_kind, "ref": hunt.root_ref or "", "summary": hunt.root_summary}
        root |= evidence.strength(hunt) or {}
    action = None
    if hunt.action is not None and hunt.action.kind not in ("none",):
        action = {
            "kind": hunt.action.kind,
            "ref": hunt.action.ref,
            "status": hunt.action.status,
            "branch": hunt.action.branch if hunt.action.status != "rejected" else None,  # never made
            "revert_sha": hunt.action.revert_sha,
            "detail": hunt.action.detail,
            "reason": hunt.action.reason if hunt.action.status != "pending" else None,
        }
    payload = {
        "run_id": hunt.run_id,
        "status": hunt.status,
        "target": {
            "repo": hunt.target.repo,
            "host": hunt.target.host,
            "metric": hunt.target.metric,
            "higher_is_better": hunt.target.higher_is_better,
        },
        "summary": hunt.root_summary or hunt.error or "",  # the one line, whatever the status
        "root_cause": root,
        "root_causes": [
            {k: c.get(k) for k in ("kind", "ref", "summary", "share_pct", "action")} for c in hunt.root_causes
        ],
        "regression": hunt.regression,
        "hypotheses": hyps,
        "probes": hunt.probes,
        "proposed_action": action,
        "culprits": hunt.culprits,
        "shape": evidence.steps(hunt),
        "after": hunt.after or None,
        "cost": Cost.model_validate(hunt.cost).model_dump(),
        "broken": hunt.broken,
        "pruned": [{"sha": p["sha"], "reason": p["reason"]} for p in hunt.pruned],
        "undone": hunt.undone,
        "error": hunt.error,
        "bad_flag": hunt.bad_flag,
        "policy": hunt.policy,
        "llm": (
            {
                "model": hunt.model,
                "turns": hunt.conversation.turns,
                "tokens": {"input": hunt.conversation.tokens_in, "output": hunt.conversation.tokens_out},
            }
            if hunt.llm is not None
            else None
        ),
    }
    Verdict.model_validate(payload)  # the contract (agent.verdict): a field it does not describe fails here
    return payload


def _cell(text: str) -> str:
    """A table cell on one line: pipes escaped, newlines as spaces (a row never breaks)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def number_rows(hunt: Hunt) -> list[tuple[str, str, str, str, str]]:
    """The Numbers table (the Markdown report's): state, its commit (or ""), median, 95 %
    interval, samples; the alert's values first, each label's latest measurement, the
    re-measurement after an approved revert last."""
    return _folded(_number_rows(hunt), NUMBER_ROWS, _more_states)


def screen_number_rows(hunt: Hunt) -> list[tuple[str, str, str, str, str]]:
    """The Numbers table as the terminal shows it, on one screen: the bisection's probes as one
    row (their range; culprit^ and culprit, measured afresh, say where the step is), the rest as
    in the Markdown report."""
    latest = hunt.latest_states()
    probes = [m for m in latest if m.label.startswith("bisect ")]
    if len(probes) <= 2:
        return number_rows(hunt)
    medians = [m.median for m in probes]
    n = sum(len(m.samples) for m in probes)
    one = ("bisection", "", f"{min(medians):.4g} to {max(medians):.4g}", "", f"{n} in {len(probes)} states")
    folded = {id(m) for m in probes}
    unconfirmed = _unconfirmed(hunt)
    rows = _alert_rows(hunt)
    for m in latest:
        if m is probes[0]:
            rows.append(one)
        elif id(m) not in folded:
            rows.append(_measurement_row(m, unconfirmed, hunt.head_sha))
    return _folded(rows + _after_rows(hunt), NUMBER_ROWS, _more_states)


def _more_states(n: int) -> tuple[str, str, str, str, str]:
    return (f"... {n} more states", "", "", "", "`sleuth show RUN` lists each")


def _number_rows(hunt: Hunt) -> list[tuple[str, str, str, str, str]]:
    unconfirmed = _unconfirmed(hunt)
    rows = [_measurement_row(m, unconfirmed, hunt.head_sha) for m in hunt.latest_states()]
    return [*_alert_rows(hunt), *rows, *_after_rows(hunt)]


def _alert_rows(hunt: Hunt) -> list[tuple[str, str, str, str, str]]:
    t = hunt.target
    return [(f"alert: {side}", "", f"{v:g}", "", "") for side, v in (("good", t.good_value), ("bad", t.bad_value)) if v]


def _unconfirmed(hunt: Hunt) -> tuple[str, ...]:
    """Commits measured as "culprit" that the hunt does not name: a refuted first guess, or a
    further step its confirmation dropped."""
    named = {*hunt.culprits, hunt.root_ref}
    return tuple(m.ref for m in hunt.measurements if m.label == "culprit" and m.ref not in named)


def _measurement_row(m, rejected: tuple[str, ...] = (), head: str | None = None) -> tuple[str, str, str, str, str]:
    """One state's row. A culprit whose confirmation failed, or that was dropped, is said so: a
    trial's table showed "culprit" beside the refuted first guess and again beside the real one.
    The working tree's state is a snapshot commit of the uncommitted work, a SHA the user never
    made: said so."""
    label = f"{m.label}, not confirmed" if m.label == "culprit" and m.ref in rejected else m.label
    if m.label == "now" and head and m.ref != head:
        label = "now: HEAD + uncommitted work as snapshot"
    return (label, m.ref[:10], f"{m.median:.4g}", f"[{m.ci_low:.4g}, {m.ci_high:.4g}]", str(len(m.samples)))


def _after_rows(hunt: Hunt) -> list[tuple[str, str, str, str, str]]:
    if hunt.after and hunt.after.get("error"):  # the applied fix could not be re-measured
        return [("after the approved revert", "", "not measured", "", hunt.after["error"])]
    if not hunt.after:
        return []
    a, rec = hunt.after, hunt.after.get("recovered_pct_of_drop")
    interval = f"[{a['ci_low']:.4g}, {a['ci_high']:.4g}]"
    recovered = evidence.of_the_drop(rec, "of the drop recovered") if rec is not None else ""
    if a.get("before_median") is not None:  # a fresh A/B against HEAD (runs approved before 2026-12-07 lack it)
        side = f"HEAD {a['before_median']:.4g} beside it ({a['delta_pct']:+.1f}%, p={a['p_value']:.2g})"
        recovered = f"{recovered}; {side}" if recovered else side
    return [("after the approved revert", "", f"{a['median']:.4g}", interval, recovered)]


# A report a person reads fits one screen: its long tables keep their first and last rows and
# count the rest (the verdict JSON and ``sleuth show RUN`` keep everything).
NUMBER_ROWS = 14


def _folded(rows: list, limit: int, fold) -> list:
    """``rows`` as they are up to ``limit``; past it, the first half and the last rows with one
    row ``fold(n)`` standing for the ``n`` between them."""
    if len(rows) <= limit:
        return rows
    head, tail = (limit - 1) // 2, limit - 1 - (limit - 1) // 2
    return [*rows[:head], fold(len(rows) - head - tail), *rows[-tail:]]


def asks_for_decision(hunt: Hunt) -> bool:
    """Does the report offer `sleuth approve`/`reject`? Only for a run awaiting approval: a concluded
    run's pending action (an `investigate` after a conflicting revert) is for a person to do by
    hand, and both commands would refuse it."""
    return hunt.action is not None and hunt.action.status == "pending" and hunt.status == "awaiting_approval"


def pruned_said(hunt: Hunt) -> str:
    """The pruned commits in one line, by reason (a table of them took a screen of its own)."""
    reasons = Counter(re.sub(r" \(\d+ file\(s\)\)$", "", p["reason"]) for p in hunt.pruned)
    why = "; ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    return f"Commits not bisected: {len(hunt.pruned)} ({why}); the verdict's `pruned` lists them"


def confirmation_what(hunt: Hunt) -> str:
    """What a commit's confirmation A/B compared: HEAD against HEAD with it reverted, or, where
    that revert conflicts or cannot be measured, its parent against it (then its text says why)."""
    if hunt.root_kind != "commit" or hunt.confirmation.get("untestable"):
        return ""
    if hunt.confirmation.get("conflict"):
        return " (the culprit's parent vs the culprit)"
    return " (HEAD vs HEAD with the culprit reverted)"


def markdown(hunt: Hunt, approve_hint: str | None = None) -> str:
    t = hunt.target
    lines = [
        f"# perf-sleuth run {hunt.run_id}",
        "",
        f"**Status:** {hunt.status}  ",
        f"**Target:** {t.repo}" + (f" on {t.host}" if t.host else "") + "  ",
        f"**Alert:** {t.summary or '-'}  ",
        f"**Policy:** {hunt.policy}"
        + (
            f" ({hunt.model}: {hunt.conversation.turns} turns, {hunt.conversation.tokens:,} tokens)"
            if hunt.llm is not None
            else ""
        ),
        "",
    ]
    lines += ["## Root cause", ""]
    if hunt.root_kind:
        ref = f" `{hunt.root_ref}`" if hunt.root_ref else ""  # "none" has no ref: no empty code span
        lines.append(f"**{hunt.root_kind}**{ref}: {hunt.root_summary}")
    else:
        lines.append(hunt.root_summary or hunt.error or "not found")
    if hunt.confirmation.get("text"):
        lines += ["", f"Confirmation A/B{confirmation_what(hunt)}: {hunt.confirmation['text']}"]
    if said := evidence.sentence(hunt):
        lines += ["", said]
    if drift := evidence.drifted(hunt):
        lines += ["", f"**Caution:** {drift}."]
    plan = hunt.confirmation.get("plan") or {}
    if hunt.root_kind == "commit" and plan.get("stat"):
        lines += ["", "Files of the prepared revert (`git diff --stat` of HEAD against it):", ""]
        lines += fenced(DiffStat.model_validate(plan["stat"]).render().splitlines())
    lines += [
        "",
        "## Numbers",
        "",
        f"| state | median {t.metric} | 95% interval | samples |",
        "| --- | --- | --- | --- |",
    ]
    for state, ref, *rest in screen_number_rows(hunt):
        lines.append("| " + " | ".join([state + (f" (`{ref}`)" if ref else ""), *rest]) + " |")
    lines += ["", "## Hypotheses", ""]
    if not hunt.hypotheses:  # a table of headers only read as if a row were lost
        lines.append("None stated.")
    else:
        lines += ["| id | category | statement | verdict | evidence |", "| --- | --- | --- | --- | --- |"]
    for g in for_screen(group_hypotheses(hunt.hypotheses)):  # one experiment's: one row; a screen at most
        covers = f": {g.covers_text()}" if len(g.ids) > 1 else ""
        cells = [g.id, g.category, g.statement + covers, f"**{g.status}**", g.reason]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "## Proposed action", ""]
    a = hunt.action
    if a is None or a.kind == "none":
        lines.append("none")
    else:
        lines.append(
            f"{a.kind}"
            + (f" `{a.ref}`" if a.ref else "")
            + f": {a.detail} - **{a.status_said}**"
            + (f" (branch `{a.branch}`)" if a.status == "applied" else "")
            + (f': "{a.reason}"' if a.status != "pending" and a.reason else "")
        )
        if approve_hint and asks_for_decision(hunt):
            lines += [
                "",
                f"Approve: `{approve_hint}`  ",
                f"Reject: `{approve_hint.replace(' approve ', ' reject ')} --reason '...'`",
            ]
    if hunt.broken:
        lines += [
            "",
            "## States that did not build, serve or run",
            "",
            "| state | ref | what happened | the first error |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| {b['label']} | `{b['ref']}` | {b['how']} | {(b.get('failure') or '-').replace('|', '/')} |"
            for b in hunt.broken
        ]
    if hunt.pruned:
        lines += ["", pruned_said(hunt)]
    lines += [
        "",
        f"States measured: {hunt.probes} (--max-probes {hunt.budget.max_probes}); steps: {len(hunt.events)} "
        f"(`timeline.md` beside this report; with every tool call, `sleuth show {hunt.run_id}`).  ",
        f"Cost: {cost_said(hunt)}.",
    ]
    return "\n".join(lines) + "\n"


def timeline(hunt: Hunt) -> str:
    """Every event of the run, timed from its start: ``timeline.md`` beside the report. In the
    report it was 200 of a run's 257 lines, where the report is what a person reads on one screen."""
    t0 = hunt.started_at
    lines = [f"# perf-sleuth run {hunt.run_id}: timeline", ""]
    lines += [f"- +{e.t - t0:6.1f}s {e.kind}: {e.text}" for e in hunt.events]
    return "\n".join(lines) + "\n"


def cost_said(hunt: Hunt) -> str:
    """What the hunt cost, in the terms of its mode: a benchmark command launches nothing."""
    c = Cost.model_validate(hunt.cost)
    if hunt.target.command:
        return (
            f"{c.samples} samples of a benchmark command (each its own process: no launches), "
            f"{c.device_s:.1f} s running it, {c.build_s:.1f} s of setup (build)"
        )
    return (
        f"{c.launches} launches, {c.samples} samples, {c.device_s:.1f} s with a server up (device time), "
        f"{c.build_s:.1f} s of setup (build); host slots: {hunt.target.slots}{c.waited_said()}"
    )


def write_report(hunt: Hunt, run_dir: Path, approve_hint: str | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "verdict.json").write_text(json.dumps(verdict(hunt), indent=2) + "\n")
    (run_dir / "report.md").write_text(markdown(hunt, approve_hint))
    (run_dir / "timeline.md").write_text(timeline(hunt))
    if hunt.measurements:
        plot(hunt, run_dir / "hunt.png")
