"""Scoring a session that was not ours: when did it first name the known root cause?

For an imported run (or any run), given the root cause (a commit SHA, a path, an env var or a
flag): the first event in which the agent itself - its messages and its tool calls, not tool
output it was shown - names it; how many events, tool calls and how much time came before that.
That is the comparison the seeds invite: hours of NCCL variables before `git show 0be30d4`.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel

AGENT_KINDS = ("assistant", "tool_call", "llm_response", "hypothesis", "verdict", "note")
# Our own hunts' observations of the world: measuring a commit in a bisection is not naming it.
OBSERVATIONS = {
    "probe_budget",
    "probe",
    "measure",
    "measure_pair",
    "measure_arms",
    "clock",
    "git_resolve",
    "git_rev_list",
    "server_args",
}


class FirstNamed(BaseModel):
    run_id: str
    root_cause: str
    kind: str
    named: bool
    seq: int | None = None  # the event's sequence number
    index: int | None = None  # 0-based position among the run's events
    seconds_from_start: float | None = None
    events_before: int | None = None
    tool_calls_before: int | None = None
    events_total: int = 0
    tool_calls_total: int = 0
    excerpt: str | None = None
    abandoned: list[str] = []  # hypotheses the run refuted (its ledger; imported sessions have none)
    refuted: list[str] = []  # of those, the ones that name the root cause: named, then dropped


def pattern(ref: str, kind: Literal["commit", "uncommitted", "env", "config", "path"] | str) -> re.Pattern:
    """How a root cause is named in text: any 7+ hex-digit prefix of a commit; a path or its file
    name; a variable or flag as written."""
    if kind == "commit":
        short = re.escape(ref[:7].lower())
        return re.compile(rf"(?<![0-9a-f]){short}[0-9a-f]*(?![0-9a-f])", re.I)
    if kind in ("uncommitted", "path") and "/" in ref:
        return re.compile(re.escape(ref.rsplit("/", 1)[-1]))
    return re.compile(re.escape(ref))


def first_named(
    run_id: str, events: list[dict], ref: str, kind: str = "commit", hypotheses: list[dict] | None = None
) -> FirstNamed:
    pat = pattern(ref, kind)
    t0 = events[0]["t"] if events else None
    calls = 0
    out = FirstNamed(
        run_id=run_id,
        root_cause=ref,
        kind=kind,
        named=False,
        events_total=len(events),
        tool_calls_total=sum(1 for e in events if e["kind"] == "tool_call"),
        abandoned=[h["statement"] for h in hypotheses or [] if h.get("status") in ("refuted", "demoted")],
    )
    out.refuted = [a for a in out.abandoned if pat.search(a)]
    for i, e in enumerate(events):
        text = e["text"] or ""
        if e["kind"] == "tool_call":
            payload = json.loads(e["payload"]) if isinstance(e.get("payload"), str) else (e.get("payload") or {})
            if payload.get("name") in OBSERVATIONS:
                calls += 1
                continue
            text += " " + json.dumps(payload.get("args"), default=str)
        if e["kind"] == "note" and '"phase": "probe"' in (e.get("payload") or ""):
            continue  # "measuring X": a probe, not a claim
        if e["kind"] in AGENT_KINDS and (m := pat.search(text)):
            lo = max(0, m.start() - 60)
            out.named, out.seq, out.index = True, e["seq"], i
            out.events_before, out.tool_calls_before = i, calls
            if t0 is not None and e.get("t") is not None:
                out.seconds_from_start = round(e["t"] - t0, 3)
            out.excerpt = text[lo : m.end() + 60].replace("\n", " ")
            return out
        calls += e["kind"] == "tool_call"
    return out
