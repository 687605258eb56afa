"""``sleuth replay RUN [--policy P] [--model M] [--offline]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent.cli import app, bad_input, db_path, out, print_json
from agent.hunt_cmd import AllowShellOpt, BaseUrlOpt, llm_options
from agent.policy import POLICY_NAMES
from agent.replay import ReplayError, replay_strict, replay_world


@app.command("replay")
def replay(
    run_id: Annotated[str, typer.Argument(metavar="RUN")],
    policy: Annotated[
        str | None, typer.Option(help=f"another policy against the recorded world ({', '.join(POLICY_NAMES)})")
    ] = None,
    model: Annotated[str | None, typer.Option(help="another model against the recorded world")] = None,
    base_url: BaseUrlOpt = None,
    allow_shell: AllowShellOpt = None,
    offline: Annotated[
        bool, typer.Option(help="never answer live: a call the recording cannot answer ends the replay")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json")] = False,
    db: Annotated[Path | None, typer.Option("--db", help="run store (default $SLEUTH_DB or the XDG data dir)")] = None,
) -> None:
    """Re-execute a recorded run from its recording: `identical` (exit 0, whatever the run's own
    status), or the first divergence (exit 1). With --policy/--model: another policy or model
    against the recorded world, stored as a new run (exit 1 when that run failed or was
    inconclusive, as a hunt's)."""
    db = db_path(db, must_exist=True)
    llm = llm_options(policy, model, base_url, allow_shell) if policy is not None else None
    try:
        if policy is None and model is None:
            res = replay_strict(db, run_id)
        else:
            res = replay_world(db, run_id, policy or "methodical", model, offline, llm)
    except ReplayError as exc:
        bad_input(str(exc))
    if json_out:
        print_json(res.model_dump())
    elif res.mode == "strict" and res.identical:
        out.print(
            f"identical: {res.events} events, {res.served} recorded answers, {res.seconds:.2f} s "
            f"(the run {res.status}; root cause {_said(res.root_cause)})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    elif res.mode == "strict":
        d = res.divergence or {}
        out.print(f"diverged at event {d.get('seq')}", highlight=False)
        out.print(f"  expected: {d.get('expected')}", highlight=False, markup=False, soft_wrap=True)
        out.print(f"  got:      {d.get('got')}", highlight=False, markup=False, soft_wrap=True)
    else:
        out.print(
            f"replay {res.new_run} of {res.run_id} ({policy or 'methodical'}{'/' + model if model else ''}): "
            f"{res.status}; root cause {_said(res.root_cause)}; {res.served} answers from the recording, "
            f"{res.live} live, {res.seconds:.1f} s" + (f"\n{res.error}" if res.error else ""),
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if res.mode == "strict" and not res.identical:
        raise typer.Exit(1)
    if res.mode != "strict" and res.status in ("failed", "inconclusive"):
        raise typer.Exit(1)


def _said(root: dict | None) -> str:
    """A root cause in words (kind and ref), where the dict itself was printed."""
    if not root or not root.get("kind"):
        return "none named"
    ref = str(root.get("ref") or "")
    short = ref[:10] if root["kind"] == "commit" else ref  # a SHA is cut; an env var's name is not
    return root["kind"] + (f" {short}" if ref else "")
