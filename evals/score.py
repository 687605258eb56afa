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

AGENT_KINDS = ("assistant", "reasoning", "tool_call", "llm_response", "hypothesis", "verdict", "note")
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
    as_written: str | None = None  # how the run wrote it ("missing_colon.py": the file name alone)
    abandoned: list[str] = []  # hypotheses the run refuted (its ledger; imported sessions have none)
    refuted: list[str] = []  # of those, the ones that name the root cause: named, then dropped
    # What the run ended on (ours: the verdict's root causes; an imported session: its last
    # message), and whether that names the root cause: named once and then dismissed is no find.
    conclusion: str | None = None
    concluded: bool = False


Kind = Literal["commit", "uncommitted", "env", "config", "path"]
HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{7,40}(?![0-9A-Za-z])")
PATHLIKE = re.compile(r"[\w.@+-]+(?:/[\w.@+-]+)*")
DIFF_SIDES = ("a/", "b/", "./")


def bad_root_cause(ref: str, kind: str) -> str | None:
    """Why ``ref`` cannot be a root cause of ``kind``, or None: a commit is 7 to 40 hex digits, a
    variable a shell name, a flag starts with "-" (``zzzzzzzz`` was taken as a commit)."""
    if kind == "commit" and not re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
        return f"a commit is 7 to 40 hex digits, not '{ref}' (a path: --kind uncommitted; a variable: --kind env)"
    if kind == "env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ref):
        return f"'{ref}' is not a variable's name"
    if kind == "config" and not ref.startswith("-"):
        return f"a flag starts with '-', not '{ref}'"
    if kind in ("uncommitted", "path") and not PATHLIKE.fullmatch(ref.strip("/")):
        return f"'{ref}' is not a path"
    return None


def find(ref: str, kind: Kind | str, text: str) -> re.Match | None:
    """Where ``text`` names the root cause, as a whole word of its kind: a commit by a hex run of
    7+ digits that is a prefix of its SHA; a variable or flag as a whole name (``NCCL_ALGO`` is
    not named by ``NCCL_ALGO_X``); a path by a path that ends with it, or by its own trailing
    components (its file name alone counts: an agent names a file by it), never by a part of a
    name ("colon" named ``missing_colon.py``) nor by another directory's file of that name."""
    if kind == "commit":
        full = ref.lower()
        return next((m for m in HEX.finditer(text) if full.startswith(m.group().lower())), None)
    if kind in ("uncommitted", "path"):
        want = ref.strip("/").split("/")
        for m in PATHLIKE.finditer(text):
            token = m.group()
            for side in DIFF_SIDES:
                token = token.removeprefix(side)
            got = [c for c in token.strip("/").split("/") if c]
            n = min(len(got), len(want))
            if n and got[-n:] == want[-n:] and (len(got) >= len(want) or got == want[-len(got) :]):
                return m
        return None
    edge = r"[\w-]" if kind == "config" else r"\w"
    return re.search(rf"(?<!{edge}){re.escape(ref)}(?!{edge})", text)


def first_named(
    run_id: str,
    events: list[dict],
    ref: str,
    kind: str = "commit",
    hypotheses: list[dict] | None = None,
    conclusion: str | None = None,
) -> FirstNamed:
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
        conclusion=conclusion,
        concluded=bool(conclusion) and find(ref, kind, conclusion or "") is not None,
    )
    out.refuted = [a for a in out.abandoned if find(ref, kind, a)]
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
        if e["kind"] in AGENT_KINDS and (m := find(ref, kind, text)):
            lo = max(0, m.start() - 60)
            out.named, out.seq, out.index, out.as_written = True, e["seq"], i, m.group()
            out.events_before, out.tool_calls_before = i, calls
            if t0 is not None and e.get("t") is not None:
                out.seconds_from_start = round(e["t"] - t0, 3)
            out.excerpt = text[lo : m.end() + 60].replace("\n", " ")
            return out
        calls += e["kind"] == "tool_call"
    return out


def conclusion_of(run: dict, events: list[dict]) -> str | None:
    """What a run ended on, as text: ours, the verdict's root causes (each ref and summary) or its
    summary; an imported session, its last message of the agent's own."""
    if run.get("kind") == "imported":
        said = [e["text"] for e in events if e["kind"] == "assistant" and (e["text"] or "").strip()]
        return said[-1] if said else None
    try:
        verdict = json.loads(run.get("verdict") or "null") or {}
    except ValueError:
        verdict = {}
    causes = verdict.get("root_causes") or ([verdict["root_cause"]] if verdict.get("root_cause") else [])
    parts = [f"{c.get('ref') or ''} {c.get('summary') or ''}".strip() for c in causes if isinstance(c, dict)]
    return "; ".join(p for p in parts if p) or run.get("root_ref") or None
