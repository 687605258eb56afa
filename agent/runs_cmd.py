"""``sleuth runs``, ``sleuth show RUN``, ``sleuth search TEXT``: browsing the transcript store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markdown import Markdown as RichMarkdown
from rich.table import Table

from agent.cli import app, bad_input, db_path, out, print_json
from agent.grouped import for_screen, group_hypotheses
from agent.verdict import action_of
from tools.text import fenced
from transcripts.store import Store
from transcripts.timeline import timeline_rows

DbOpt = Annotated[Path | None, typer.Option("--db", help="run store (default $SLEUTH_DB or the XDG data dir)")]


def _open(db: Path | None) -> Store:
    return Store(db_path(db, must_exist=True))


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else ""


@app.command("runs")
def runs(
    limit: Annotated[int, typer.Option(min=1)] = 50,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """The runs in the store, newest first."""
    store = _open(db)
    rows = store.runs(limit)
    if json_out:
        print_json([{k: v for k, v in r.items() if k != "verdict"} | {"action": action_of(r)} for r in rows])
        return
    # A pipe's columns keep their places (a script's `cut -f6` still reads the root cause): the
    # action, added 2026-12-07, comes last there, beside the status on screen.
    table = [
        {
            "id": r["id"],
            "started": _when(r["started"]),
            "target": r.get("target") or "",
            "policy": r.get("policy") or r["kind"],
            "status": r.get("status") or "",
            "root cause": r.get("root_summary") or "",
            "probes": str(r.get("probes") or ""),
            "time": f"{r['ended'] - r['started']:.0f}s" if r.get("ended") and r.get("started") else "",
            "action": action_of(r),
        }
        for r in rows
    ]
    if not out.is_terminal:  # a pipe: every value in full, tab-separated, one run per line
        cols = ("id", "started", "target", "policy", "status", "root cause", "probes", "time", "action")
        print("\t".join(cols))
        for row in table:
            print("\t".join(" ".join(row[c].split()) for c in cols))
        return
    out.print(_runs_table(table, f"runs in {store.path}", out.width))


# Where a terminal's table cuts: the target and the root cause share what the other (whole) values
# leave, the target a third of it at most; with less than this for both, the targets leave the
# screen to the root cause and are counted below it.
SQUEEZED = ("target", "root cause")
ROOM_FOR_TARGETS = 40


def _runs_table(table: list[dict], title: str, width: int) -> Table:
    """``sleuth runs`` on one screen: one line a run, every id whole (what a person copies into
    `sleuth show`; at 120 columns each was cut to "20261207-183…"), the start without its year
    and seconds, the target's last two path parts; a target or policy every run shares is said
    once below the table instead of a column."""
    cols = ["id", "started", "target", "policy", "status", "action", "root cause", "probes", "time"]
    said = []
    for col in ("target", "policy"):
        if table and len({row[col] for row in table}) == 1:
            cols.remove(col)
            said.append(f"{col} {table[0][col]}")
    shown = [
        row | {"started": row["started"][5:16], "target": "/".join(Path(row["target"]).parts[-2:]),
               "root cause": row["root cause"][:60]}
        for row in table
    ]  # fmt: skip
    wide = {c: max(len(c), *(len(row[c]) for row in shown)) for c in cols}
    left = width - 1 - sum(3 + w for c, w in wide.items() if c not in SQUEEZED) - 3  # the root cause's padding
    if "target" in cols and left < ROOM_FOR_TARGETS:
        cols.remove("target")
        said.append(f"{len({row['target'] for row in table})} targets (a pipe or --json names them)")
    room = {"target": min(wide["target"], max(8, (left - 3) // 3))} if "target" in cols else {}
    room["root cause"] = max(8, left - sum(3 + w for w in room.values()))
    t = Table(title=title, caption=", ".join(said) or None)
    for c in cols:
        if c in room:
            t.add_column(c, no_wrap=True, overflow="ellipsis", max_width=room[c])
        else:
            t.add_column(c, no_wrap=True, min_width=wide[c])
    for row in shown:
        t.add_row(*(row[c] for c in cols))
    return t


def _timeline(store: Store, run_id: str) -> list[str]:
    """One line per event (``transcripts.timeline``), with its time from the run's start."""
    events = store.events(run_id)
    t0 = events[0]["t"] if events else 0
    return [
        f"+{r['t'] - t0:7.2f}s #{r['seq']:<4} {r['kind']:<12} {r['text']}" + (f" ({r['dur']:.2f}s)" if r["dur"] else "")
        for r in timeline_rows(events)
    ]


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    markdown: Annotated[bool, typer.Option("--markdown")] = False,
    db: DbOpt = None,
) -> None:
    """One run: hypotheses with verdicts, tool calls with durations, measurements, approvals."""
    store = _open(db)
    run = store.run(run_id)
    if run is None:
        bad_input(f"RUN: no run '{run_id}' in {store.path}")
    hyps, meas = store.hypotheses(run_id), store.measurements(run_id)
    if json_out:
        print_json(
            {
                "run": {**run, "verdict": json.loads(run["verdict"]) if run.get("verdict") else None},
                "hypotheses": hyps,
                "measurements": meas,
                "events": store.events(run_id),
            }
        )
        return
    summary = run.get("root_summary") or ""
    lines = [
        f"# run {run_id}",
        "",
        f"status {run.get('status')}" + (f" - {summary}" if summary else ""),
        *([f"evaluation {run['eval_set']} (`sleuth eval --rescore {run['eval_set']}`)"] if run.get("eval_set") else []),
        *_action_lines(run),
    ]
    if hyps:  # an imported session has none, nor measurements: no empty headings
        lines += ["", "## Hypotheses", ""]
    for g in for_screen(group_hypotheses(hyps)):  # one experiment's: one line; a screen at most
        covers = f" ({g.covers_text()})" if len(g.ids) > 1 else ""
        lines.append(f"- {g.id} [{g.category}] **{g.status}**: {g.statement}{covers} - {g.reason}")
    if meas:
        lines += ["", "## Measurements", ""]
    lines += [
        f"- {m['mid']} {m['label']} `{m['ref'][:10]}`: {m['median']:.4g} [{m['ci_low']:.4g}, {m['ci_high']:.4g}] "
        f"({len(json.loads(m['samples']))} samples)"
        for m in meas
    ]
    lines += ["", "## Timeline", "", *fenced(_timeline(store, run_id))]
    text = "\n".join(lines) + "\n"
    if markdown or not out.is_terminal:  # Markdown as it is: no line wrapped at a terminal's width
        print(text, end="")
    else:
        out.print(RichMarkdown(text))


def _action_lines(run: dict) -> list[str]:
    """The proposal and what a person decided (the help promised approvals, and `show` had none):
    the action and its status, the reason given, and an approved fix's re-measurement."""
    try:
        verdict = json.loads(run.get("verdict") or "null") or {}
    except ValueError:
        return []
    action, after = verdict.get("proposed_action") or {}, verdict.get("after") or {}
    if not action or action.get("kind") in (None, "none"):
        return []
    branch = f" on `{action['branch']}`" if action.get("branch") else ""
    lines = ["", "## Proposed action", "", f"- {action.get('detail') or action['kind']}: **{action_of(run)}**{branch}"]
    if action.get("reason"):
        lines.append(f"- reason: {action['reason']}")
    if after.get("median") is not None and after.get("before_median") is not None:
        lines.append(
            f"- re-measured: HEAD {after['before_median']:.4g} vs the fix {after['median']:.4g} "
            f"({after.get('delta_pct', 0):+.1f}%, p={after.get('p_value') or 0:.2g}): "
            f"{after.get('recovered_pct_of_drop')}% of the drop recovered"
        )
    return lines


@app.command("search")
def search(
    text: Annotated[str, typer.Argument(help="words to find in any run's events")],
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """Full-text search over every event of every run."""
    if not text.strip():  # FTS5 reads nothing as a syntax error, and said it as a traceback
        bad_input("TEXT: empty; give the words to find")
    store = _open(db)
    hits = store.search(text)
    if json_out:
        print_json(hits)
        return
    for h in hits:
        line = f"{h['run']} #{h['seq']} {h['kind']}: {h['text']}"
        if out.is_terminal:
            out.print(line, markup=False, highlight=False)
        else:
            print(line)
    if not hits:
        out.print("no match")
