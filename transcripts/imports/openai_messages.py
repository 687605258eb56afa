"""An OpenAI chat messages list (``[{role, content, tool_calls}, ...]`` or ``{"messages": [...]}``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from transcripts.imports import BadRecord, Session, Step, convert_each, load_json, text_of


def message_steps(m: dict[str, Any], t: float | None = None, model: str | None = None) -> list[Step]:
    """Steps of one OpenAI-shaped message (shared by the SWE-agent and mini-swe-agent readers)."""
    if not isinstance(m, dict):
        raise TypeError(f"a message is a {type(m).__name__}, not an object")
    role = m["role"]
    usage = None
    if isinstance(m.get("usage"), dict):
        u = m["usage"]
        usage = {"input": int(u.get("prompt_tokens") or 0), "output": int(u.get("completion_tokens") or 0)}
    if role in ("system", "developer"):
        return [Step(kind="system", text=text_of(m.get("content")), t=t, raw=m)]
    if role == "user":
        return [Step(kind="user", text=text_of(m.get("content")), t=t, raw=m)]
    if role == "tool":
        ids = m.get("tool_call_id") or m.get("tool_call_ids")
        call_id = ids[0] if isinstance(ids, list) and ids else ids
        return [Step(kind="tool_result", text=text_of(m.get("content")), call_id=call_id, t=t, raw=m)]
    if role != "assistant":
        raise ValueError(f"role '{role}' is not system, user, assistant or tool")
    steps = []
    text = text_of(m.get("content"))
    calls = m.get("tool_calls") or []
    if text or not calls:
        steps.append(Step(kind="assistant", text=text, t=t, usage=usage, model=model, raw=m))
        usage = None
    for c in calls:
        fn = c["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            with contextlib.suppress(json.JSONDecodeError):  # else kept as the model wrote it
                args = json.loads(args) if args.strip() else {}
        steps.append(
            Step(
                kind="tool_call",
                text=f"{fn['name']}({json.dumps(args)[:200]})",
                tool=fn["name"],
                call_id=c.get("id"),
                args=args,
                t=t,
                usage=usage,
                model=model,
                raw=c,
            )
        )
        usage = None
    return steps


def read(path: Path, skip_bad: bool = False) -> Session:
    data = load_json(path)
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise BadRecord(f"{path}: messages: not a list")
    s = Session(
        format="openai-messages", source=str(path), agent=(data.get("agent") if isinstance(data, dict) else None)
    )
    if isinstance(data, dict):
        s.model, s.title, s.session_id = data.get("model"), data.get("title"), data.get("id")
    convert_each(
        ((f"{path}: messages[{i}]", m) for i, m in enumerate(messages)),
        lambda m: message_steps(m, _time(m), s.model),
        s,
        skip_bad,
    )
    return s


def _time(m: Any) -> float | None:
    t = m.get("timestamp") if isinstance(m, dict) else None
    return float(t) if isinstance(t, int | float) else None
