"""mini-swe-agent trajectories: ``{"info", "messages", "trajectory_format"}``.

``mini-swe-agent-1``: the model writes its command in a ```bash block of its message, and the
output comes back as the next user message. ``mini-swe-agent-1.1``: OpenAI tool calls and
``tool`` messages. Cost and call counts are in ``info.model_stats``."""

from __future__ import annotations

import re
from pathlib import Path

from transcripts.imports import BadRecord, Session, Step, convert_each, load_json, text_of
from transcripts.imports.openai_messages import message_steps

BASH_BLOCK = re.compile(r"```(?:bash|sh)\s*\n(.*?)\n```", re.S)


def read(path: Path, skip_bad: bool = False) -> Session:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise BadRecord(f"{path}: messages: missing or not a list")
    info = data.get("info") or {}
    s = Session(format="mini-swe-agent", source=str(path), agent="mini-swe-agent")
    s.model = ((info.get("config") or {}).get("model") or {}).get("model_name")
    pending: list[str] = []  # ids of text-format actions waiting for their output

    def convert(m: dict) -> list[Step]:
        if m.get("tool_calls") or m.get("role") == "tool":
            return message_steps(m, model=s.model)
        role, text = m["role"], text_of(m.get("content"))
        if role == "assistant":
            steps = message_steps(m, model=s.model)  # the text, with the response's usage
            for i, cmd in enumerate(BASH_BLOCK.findall(text)):
                call_id = f"action-{len(s.steps) + len(steps)}-{i}"
                pending.append(call_id)
                steps.append(
                    Step(kind="tool_call", text=cmd, tool="bash", call_id=call_id, args={"command": cmd}, raw=m)
                )
            return steps
        if role == "user" and pending:
            return [Step(kind="tool_result", text=text, call_id=pending.pop(0), raw=m)]
        return message_steps(m, model=s.model)

    convert_each(((f"{path}: messages[{i}]", m) for i, m in enumerate(data["messages"])), convert, s, skip_bad)
    return s
