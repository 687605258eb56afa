"""``sleuth import PATH`` (another agent's session as a run) and ``sleuth export RUN``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agent.cli import app, bad_input, db_path, out, output_file, print_json
from transcripts.exports import framed, to_atif, to_openai_messages
from transcripts.imports import FORMATS, BadRecord, read_session
from transcripts.imports.save import save
from transcripts.store import Store

DbOpt = Annotated[Path | None, typer.Option("--db", help="run store (default $SLEUTH_DB or the XDG data dir)")]


@app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(help="a session file, an opencode storage/ folder or opencode.db")],
    fmt: Annotated[
        str | None, typer.Option("--format", help=f"one of {', '.join(FORMATS)} (default: detected)")
    ] = None,
    session: Annotated[str | None, typer.Option(help="which session, in a store of many (opencode)")] = None,
    skip_bad: Annotated[bool, typer.Option(help="import what can be read; count what cannot")] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: DbOpt = None,
) -> None:
    """Import another agent's session as a run of kind `imported`."""
    if fmt is not None and fmt not in FORMATS:
        bad_input(f"--format: unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    try:
        s = read_session(path, fmt, session, skip_bad)
    except BadRecord as exc:
        bad_input(str(exc))
    if not s.steps:  # '[]', an empty session, another format's file read leniently: nothing to keep
        bad_input(f"PATH: {path}: no step of a {s.format} session in it (is --format right?)")
    store = Store(db_path(db))
    try:
        run_id, how = save(store, s)
        held = len(store.events(run_id))
    finally:
        store.close()
    summary = {
        "run_id": run_id,
        "new": how == "imported",
        "action": how,
        "format": s.format,
        "session_id": s.session_id,
        "events": len(s.steps),
        "tool_calls": sum(1 for x in s.steps if x.kind == "tool_call"),
        "tokens": s.tokens(),
        "skipped": s.skipped,
        "problems": s.problems[:20],
    }
    if json_out:
        print_json(summary)
        return
    verb = {"imported": "imported", "already": "already imported as", "updated": "updated"}.get(how)
    tokens = (
        f"tokens in {summary['tokens'].get('input', 0):,} / out {summary['tokens'].get('output', 0):,}"
        if s.counts_tokens
        else "no token counts in this format"
    )
    if how == "holds more":  # a truncated copy of a session imported whole
        out.print(
            f"already imported as {run_id}, which holds {held} events of session {s.session_id} "
            f"(this copy: the first {summary['events']} of them); nothing changed",
            highlight=False,
            soft_wrap=True,
        )
        return
    out.print(
        f"{verb} {run_id}: {s.format}, {summary['events']} events ({summary['tool_calls']} tool calls), {tokens}"
        + (f", {s.skipped} bad record(s) skipped" if s.skipped else "")
        + (" (the session had grown since its import)" if how == "updated" else ""),
        highlight=False,
        soft_wrap=True,  # one line, also into a pipe (Rich's 80 columns cut "tokens in" from its number)
    )
    for p in s.problems[:5]:
        out.print(f"  skipped: {p}", highlight=False, markup=False, soft_wrap=True)


@app.command("export")
def export_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    fmt: Annotated[str, typer.Option("--format", help="openai-messages or atif")] = "openai-messages",
    output: Annotated[Path | None, typer.Option("--out", help="write here instead of stdout")] = None,
    db: DbOpt = None,
) -> None:
    """Write a run out as an OpenAI messages list or an ATIF trajectory."""
    if fmt not in ("openai-messages", "atif"):
        bad_input(f"--format: unknown format '{fmt}' (known: openai-messages, atif)")
    if output is not None:
        output_file("--out", output)
    path = db_path(db, must_exist=True)
    store = Store(path)
    try:
        run = store.run(run_id)
        if run is None:
            bad_input(f"RUN: no run '{run_id}' in {path}")
        events = store.events(run_id)
    finally:
        store.close()
    events = framed(run, events)  # a hunt opened by its task and closed by its verdict
    doc = to_openai_messages(events) if fmt == "openai-messages" else to_atif(run, events)
    if output is not None:
        output.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        print_json(doc)
