"""SWE-agent ``.traj`` files: ``history[]`` (OpenAI-shaped messages, tool calls with ids, tool
results with ``tool_call_ids``) and, when there is no history, ``trajectory[]`` (thought / action /
observation / execution_time). Token totals come from ``info.model_stats``."""

from __future__ import annotations

import json
from pathlib import Path

from transcripts.imports import BadRecord, Session, Step, convert_each, load_json
from transcripts.imports.openai_messages import message_steps


def read(path: Path, skip_bad: bool = False) -> Session:
    data = load_json(path)
    if not isinstance(data, dict):
        raise BadRecord(f"{path}: not a SWE-agent trajectory (top level is not an object)")
    info = data.get("info") or {}
    s = Session(format="swe-agent", source=str(path), agent="swe-agent")
    stats = info.get("model_stats") or {}
    s.model = ((data.get("replay_config") or {}) if isinstance(data.get("replay_config"), dict) else {}).get("model")
    history = data.get("history") or []
    if history:

        def convert(m: dict) -> list[Step]:
            steps = message_steps(m)
            if m.get("role") == "assistant" and not m.get("tool_calls") and m.get("action"):
                steps.append(
                    Step(kind="tool_call", text=m["action"], tool="bash", args={"command": m["action"]}, raw=m)
                )
            return steps

        convert_each(((f"{path}: history[{i}]", m) for i, m in enumerate(history)), convert, s, skip_bad)
        trajectory = data.get("trajectory") if isinstance(data.get("trajectory"), list) else []
        _with_trajectory(s, trajectory, path, skip_bad)
    else:
        trajectory = data.get("trajectory")
        if not isinstance(trajectory, list):
            raise BadRecord(f"{path}: history/trajectory: neither is a list")
        convert_each(((f"{path}: trajectory[{i}]", st) for i, st in enumerate(trajectory)), _step, s, skip_bad)
    if stats.get("tokens_sent") or stats.get("tokens_received"):
        s.totals = {"input": int(stats.get("tokens_sent") or 0), "output": int(stats.get("tokens_received") or 0)}
    if isinstance(s.model, str):
        s.model = s.model
    elif "replay_config" in data:
        try:
            cfg = json.loads(data["replay_config"]) if isinstance(data["replay_config"], str) else data["replay_config"]
            s.model = ((cfg.get("agent") or {}).get("model") or {}).get("name")
        except (ValueError, AttributeError):
            s.model = None
    return s


def _step(st: dict, call_id: str | None = None) -> list[Step]:
    """One ``trajectory[]`` entry: the thought, the action, what it printed and how long it ran
    (``call_id``: where the history's calls carry ids, the same kind of pairing for this one)."""
    action = st["action"]
    return [
        Step(kind="assistant", text=st.get("thought") or st.get("response") or "", raw=st),
        Step(kind="tool_call", text=action, tool="bash", args={"command": action}, call_id=call_id, raw=st),
        Step(
            kind="tool_result",
            text=str(st.get("observation") or ""),
            call_id=call_id,
            duration_s=_seconds(st),
            raw=st,
        ),
    ]


def _with_trajectory(s: Session, trajectory: list, path: Path, skip_bad: bool) -> None:
    """``history`` is what the model was shown, and ends before the last action's result: the
    final ``submit`` (in ``trajectory`` and ``info.exit_status``) was lost, and a trial's score
    said "0 of 4 tool calls" of a session of 5. The k-th call of the history is ``trajectory[k]``:
    each result gets its ``execution_time``, and the steps past the history are added."""
    results = [st for st in s.steps if st.kind == "tool_result"]
    calls = sum(1 for st in s.steps if st.kind == "tool_call")
    for st, entry in zip(results, trajectory, strict=False):
        if isinstance(entry, dict):
            st.duration_s = _seconds(entry)
    rest = [(f"trajectory[{i}]", st) for i, st in enumerate(trajectory) if i >= calls]
    convert_each(((f"{path}: {at}", (at, st)) for at, st in rest), lambda x: _step(x[1], x[0]), s, skip_bad)


def _seconds(entry: dict) -> float | None:
    try:
        return float(entry["execution_time"])
    except (KeyError, TypeError, ValueError):
        return None
