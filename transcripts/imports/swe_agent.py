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
    else:
        trajectory = data.get("trajectory")
        if not isinstance(trajectory, list):
            raise BadRecord(f"{path}: history/trajectory: neither is a list")

        def convert_step(st: dict) -> list[Step]:
            action = st["action"]
            return [
                Step(kind="assistant", text=st.get("thought") or st.get("response") or "", raw=st),
                Step(kind="tool_call", text=action, tool="bash", args={"command": action}, raw=st),
                Step(kind="tool_result", text=str(st.get("observation") or ""), raw=st),
            ]

        convert_each(((f"{path}: trajectory[{i}]", st) for i, st in enumerate(trajectory)), convert_step, s, skip_bad)
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
