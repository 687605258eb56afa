"""Claude Code JSONL sessions (``~/.claude/projects/<project>/<session>.jsonl``).

The lines form a tree by ``uuid`` / ``parentUuid`` (an edited prompt starts a branch): the session
is the chain from the newest main-thread line back to the root. One API response can span several
lines sharing ``message.id`` (one per content block, written as it streams); its ``usage`` counts
once, from its last line: the earlier lines carry the output count so far (8 tokens on a text
block's line, 322 on the tool call's that ends the same response). Tool results come back as ``user`` lines
with ``tool_result`` blocks. Lines of type summary, system, file-history-snapshot and progress, and
``isMeta`` lines, are not steps.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from transcripts.imports import BadRecord, Session, Step, convert_each, text_of

SKIP_TYPES = {"summary", "system", "file-history-snapshot", "progress"}


def _time(line: dict) -> float | None:
    ts = line.get("timestamp")
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _usage(u: dict) -> dict[str, int]:
    cached = int(u.get("cache_read_input_tokens") or 0)
    created = int(u.get("cache_creation_input_tokens") or 0)
    return {
        "input": int(u.get("input_tokens") or 0) + cached + created,
        "output": int(u.get("output_tokens") or 0),
        "cache_read": cached,
    }


def read(path: Path, skip_bad: bool = False) -> Session:
    s = Session(format="claude-code", source=str(path), agent="claude-code")
    lines: list[tuple[int, dict]] = []
    try:
        raw_lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRecord(f"{path}: cannot read: {exc}") from exc
    for no, text in enumerate(raw_lines, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
            if not isinstance(obj, dict):
                raise ValueError("a line is not a JSON object")
        except ValueError as exc:
            msg = f"{path}:{no}: invalid JSON ({exc})"
            if not skip_bad:
                raise BadRecord(msg) from exc
            s.skipped += 1
            s.problems.append(msg)
            continue
        lines.append((no, obj))
    by_uuid = {obj["uuid"]: obj for _no, obj in lines if obj.get("uuid")}
    leaf = next(
        (
            obj
            for _no, obj in reversed(lines)
            if obj.get("uuid") and obj.get("type") in ("user", "assistant") and not obj.get("isSidechain")
        ),
        None,
    )
    chain: set[str] = set()
    node = leaf
    while node is not None and node["uuid"] not in chain:
        chain.add(node["uuid"])
        node = by_uuid.get(node.get("parentUuid") or "")
    seen_responses: set[str] = set()
    final_usage = {  # message id -> the usage of its last line (the response's whole count)
        obj["message"]["id"]: obj["message"]["usage"]
        for _no, obj in lines
        if obj.get("uuid") in chain
        and isinstance(obj.get("message"), dict)
        and obj["message"].get("id")
        and isinstance(obj["message"].get("usage"), dict)
    }

    def convert(obj: dict) -> list[Step]:
        s.session_id = s.session_id or obj.get("sessionId")
        t, msg = _time(obj), obj["message"]
        if not isinstance(msg, dict):
            raise TypeError("message is not an object")
        if obj["type"] == "user":
            content = msg["content"]
            if isinstance(content, str):
                return [Step(kind="user", text=content, t=t, raw=obj)]
            steps = []
            for block in content:
                if block.get("type") == "tool_result":
                    steps.append(
                        Step(
                            kind="tool_result",
                            text=text_of(block.get("content")),
                            call_id=block["tool_use_id"],
                            is_error=bool(block.get("is_error")),
                            t=t,
                            raw=obj,
                        )
                    )
                elif block.get("type") == "text":
                    steps.append(Step(kind="user", text=block["text"], t=t, raw=obj))
                elif block.get("type") == "image":
                    steps.append(Step(kind="user", text="[image]", t=t, raw=obj))
            return steps
        model = msg.get("model")
        s.model = s.model or model
        usage = None
        if msg.get("id") not in seen_responses and isinstance(msg.get("usage"), dict):
            seen_responses.add(msg.get("id"))
            usage = _usage(final_usage.get(msg.get("id"), msg["usage"]))
        steps = []
        for block in msg["content"] if isinstance(msg["content"], list) else [{"type": "text", "text": msg["content"]}]:
            kind = block.get("type")
            if kind == "text":
                steps.append(Step(kind="assistant", text=block["text"], t=t, model=model, usage=usage, raw=obj))
            elif kind == "tool_use":
                args = block.get("input") or {}
                steps.append(
                    Step(
                        kind="tool_call",
                        text=f"{block['name']}({json.dumps(args)[:200]})",
                        tool=block["name"],
                        call_id=block["id"],
                        args=args,
                        t=t,
                        model=model,
                        usage=usage,
                        raw=obj,
                    )
                )
            elif kind == "thinking" and (block.get("thinking") or "").strip():
                steps.append(Step(kind="reasoning", text=block["thinking"], t=t, model=model, raw=obj))
                continue  # the response's usage goes on what it said or called
            else:
                continue  # redacted_thinking (nothing to read), and blocks of no step
            usage = None
        return steps

    def wanted(obj: dict[str, Any]) -> bool:
        return (
            obj.get("uuid") in chain
            and obj.get("type") in ("user", "assistant")
            and obj.get("type") not in SKIP_TYPES
            and not obj.get("isMeta")
        )

    convert_each(((f"{path}:{no}", obj) for no, obj in lines if wanted(obj)), convert, s, skip_bad)
    return s
