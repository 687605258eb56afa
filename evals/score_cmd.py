"""``sleuth score RUN --root-cause REF [--kind commit]`` (plugged in through ``perf_sleuth.cli``)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from agent.cli import bad_input, db_path
from evals.score import bad_root_cause, conclusion_of, first_named
from tools.text import counted
from transcripts.store import Store


def score(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    root_cause: Annotated[str, typer.Option("--root-cause", help="the SHA, path, env var or flag")],
    kind: Annotated[str, typer.Option(help="commit, uncommitted, env or config")] = "commit",
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: Annotated[Path | None, typer.Option("--db", help="run store")] = None,
) -> None:
    """When did the run first name the root cause, what came before, and does its conclusion name
    it? Exit 0 only where the conclusion does: named once and then dismissed is no find."""
    path = db_path(db, must_exist=True)
    if kind not in ("commit", "uncommitted", "env", "config"):
        bad_input(f"--kind: unknown kind '{kind}' (commit, uncommitted, env, config)")
    if why := bad_root_cause(root_cause, kind):
        bad_input(f"--root-cause: {why}")
    store = Store(path)
    try:
        run = store.run(run_id)
        if run is None:
            bad_input(f"RUN: no run '{run_id}' in {path}")
        events = store.events(run_id)
        res = first_named(run_id, events, root_cause, kind, store.hypotheses(run_id), conclusion_of(run, events))
    finally:
        store.close()
    if json_out:
        sys.stdout.write(res.model_dump_json(indent=2) + "\n")
    elif res.named:
        t = f", {res.seconds_from_start:.0f} s in" if res.seconds_from_start is not None else ""
        written = f" (written {res.as_written})" if res.as_written and res.as_written != root_cause else ""
        print(
            f"{run_id}: named {root_cause}{written} at event #{res.seq} ({counted(res.events_before or 0, 'event')} "
            f"and {res.tool_calls_before} of {counted(res.tool_calls_total, 'tool call')} before it{t})"
            f"\n  ...{res.excerpt}..."
        )
        if res.refuted:  # named, then dropped: the first mention was no finding
            print(f"  then refuted by the run itself: {_cut(res.refuted[0], 120)}")
        if res.abandoned:
            print(f"  abandoned ({len(res.abandoned)}): " + "; ".join(_cut(a, 70) for a in res.abandoned[:8]))
    else:
        print(
            f"{run_id}: never named {root_cause} ({counted(res.events_total, 'event')}, "
            f"{counted(res.tool_calls_total, 'tool call')})"
        )
    if not json_out:
        ended = _cut(res.conclusion, 160) if res.conclusion else "nothing"
        print(f"  its conclusion {'names it' if res.concluded else 'does not name it'}: {ended}")
    if not res.concluded:
        raise typer.Exit(1)


def _cut(text: str, width: int) -> str:
    """``text`` within ``width`` characters, cut between words (a hypothesis cut mid-word read
    as another word)."""
    return textwrap.shorten(text, width, placeholder=" …")
