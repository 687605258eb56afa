"""A run's events as a person reads them: one row per event, a tool call and its result on one.

Shared by `sleuth show` and the service's page (which had listed no tool call, so an imported
agent session's page showed four messages of its 28 events)."""

from __future__ import annotations

import json

# A tool call's arguments run to a whole launch command and an inlined script (1,700 characters),
# which a terminal wraps over a dozen rows: a call's line is cut to this many characters before
# what came back (``--json`` has every event whole). Hypotheses, verdicts and notes stay whole.
CALL_WIDTH = 150


def timeline_rows(events: list[dict]) -> list[dict]:
    """One row per event (``seq``, ``t``, ``kind``, ``text``, ``dur``); a tool call and its result
    share one (the call's arguments, cut at ``CALL_WIDTH``, then what came back). An imported
    session's calls carry ids, and parallel calls' results come back later and in any order: each
    call gets the result with its id (it had got whatever result came next, another call's). A
    hunt's own calls have no ids: each is answered by the event after it."""
    answer = _answers(events)
    taken = set(answer.values())
    rows: list[dict] = []
    for i, e in enumerate(events):
        if i in taken:
            continue
        text, dur = e["text"], e.get("duration_s")
        head = 29  # what precedes the text on a line of `sleuth show` ("+  12.34s #56   tool_call    ")
        if e["kind"] == "tool_call":
            if head + len(text) > CALL_WIDTH:
                text = text[: max(20, CALL_WIDTH - head - 1)] + "…"
            if (j := answer.get(i)) is not None:
                res = events[j]
                text += " -> " + _result_line(res, res["text"].removeprefix(text.split(" ", 1)[0] + ": "))
                dur = res.get("duration_s")  # the call's own time, as its result says
        elif e["kind"] == "tool_result":  # one no call claimed
            text = _result_line(e, text)
        rows.append({"seq": e["seq"], "t": e["t"], "kind": e["kind"], "text": text, "dur": dur})
    return rows


def _result_line(event: dict, text: str) -> str:
    """What a call got back, on the call's line: its first line, cut at ``CALL_WIDTH``, with how
    many more lines it had; an error marked as one. A trial's imported session printed 1,236 lines
    (whole files after "->"), and a denied write read as an ordinary result."""
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    if len(first) > CALL_WIDTH:
        first = first[: CALL_WIDTH - 1] + "…"
    more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return ("ERROR: " if payload_of(event).get("is_error") else "") + first + more


def payload_of(event: dict) -> dict:
    """An event's payload as a dict (the store keeps it as JSON text)."""
    raw = event.get("payload")
    if isinstance(raw, dict):
        return raw
    try:
        payload = json.loads(raw or "null")
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _answers(events: list[dict]) -> dict[int, int]:
    """Each tool call's index -> its result's: by call id where the call has one, else the event
    right after it when that is a result without an id."""
    ids = [payload_of(e).get("call_id") if e["kind"] in ("tool_call", "tool_result") else None for e in events]
    result_at = {
        cid: j for j, (e, cid) in enumerate(zip(events, ids, strict=True)) if e["kind"] == "tool_result" and cid
    }
    answer: dict[int, int] = {}
    for i, e in enumerate(events):
        if e["kind"] != "tool_call":
            continue
        if ids[i]:
            j = result_at.get(ids[i])
            if j is not None and j > i:
                answer[i] = j
        elif i + 1 < len(events) and events[i + 1]["kind"] == "tool_result" and not ids[i + 1]:
            answer[i] = i + 1
    return answer
