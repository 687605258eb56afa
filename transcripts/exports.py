"""A stored run written back out: as an OpenAI chat messages list, or as ATIF (Harbor's Agent
Trajectory Interchange Format, v1.4).

Imported sessions map one to one (system / user / assistant / tool_call / tool_result). A hunt of
ours is written as the agent it is: each observation of the world (``tool_call`` / ``tool_result``)
a tool call and its result, each hypothesis, verdict, measurement and note an assistant message.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from transcripts.timeline import payload_of

ATIF_VERSION = "ATIF-v1.4"


def _turns(events: list[dict]) -> list[dict]:
    """Events folded into turns: {role, text, calls: [{id, name, args, result, is_error}], usage, t, model}."""
    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    pending_reasoning: list[str] = []

    def think(turn: dict) -> None:  # the reasoning that came before it, on the agent's turn
        if pending_reasoning:
            turn["reasoning"] = "\n".join(filter(None, [turn.get("reasoning"), *pending_reasoning]))
            pending_reasoning.clear()

    for e in events:
        kind, p = e["kind"], payload_of(e)
        if kind in ("system", "user"):
            turns.append({"role": kind, "text": e["text"], "calls": [], "t": e.get("t")})
            continue
        if kind == "tool_call":
            call_id = p.get("call_id") or f"call-{e['seq']}"
            name = p.get("tool") or p.get("name") or "tool"
            args = p.get("args") if p.get("args") is not None else {}
            agent = turns[-1] if turns and turns[-1]["role"] == "assistant" and not _answered(turns[-1]) else None
            if agent is None:
                agent = {"role": "assistant", "text": "", "calls": [], "t": e.get("t")}
                turns.append(agent)
            think(agent)
            call = {"id": call_id, "name": name, "args": args, "result": None, "is_error": False}
            agent["calls"].append(call)
            by_id[call_id] = call
            _add_usage(agent, p)
            continue
        if kind == "tool_result":
            call_id = p.get("call_id")
            call = by_id.get(call_id) if call_id else None
            if call is None:  # our own runs: the result answers the newest open call of that name
                call = next(
                    (
                        c
                        for t in reversed(turns)
                        for c in t["calls"]
                        if c["result"] is None and c["name"] == p.get("name")
                    ),
                    None,
                ) or next((c for t in reversed(turns) for c in t["calls"] if c["result"] is None), None)
            text = (
                e["text"] if kind == "tool_result" and "result" not in p else json.dumps(p.get("result"), default=str)
            )
            if p.get("error"):
                text = json.dumps(p["error"])
            if call is not None:
                call["result"], call["is_error"] = text, bool(p.get("is_error") or p.get("error"))
            continue
        if kind == "reasoning":  # the thinking before the agent's next turn: never its content
            pending_reasoning.append(e["text"])
            continue
        # assistant, llm_response, and our hypothesis / verdict / measurement / note / approval / error
        if kind == "llm_request":
            continue
        text = e["text"] if kind in ("assistant", "llm_response") else f"[{kind}] {e['text']}"
        last = turns[-1] if turns else None
        if last and last["role"] == "assistant" and not last["calls"] and kind not in ("assistant", "llm_response"):
            last["text"] += "\n" + text
        else:
            turns.append({"role": "assistant", "text": text, "calls": [], "t": e.get("t"), "model": p.get("model")})
        think(turns[-1])
        _add_usage(turns[-1], p)
    if pending_reasoning:  # thinking after the agent's last word
        last = next((t for t in reversed(turns) if t["role"] == "assistant"), None)
        if last is not None:
            think(last)
    return turns


def _answered(turn: dict) -> bool:
    return bool(turn["calls"]) and all(c["result"] is not None for c in turn["calls"])


def _add_usage(turn: dict, p: dict) -> None:
    u = p.get("usage")
    if isinstance(u, dict):
        have = turn.setdefault("usage", {})
        for k, v in u.items():
            have[k] = have.get(k, 0) + int(v or 0)


def framed(run: dict, events: list[dict]) -> list[dict]:
    """A hunt's events as a session a reader (or a model) can follow: opened by the task as a user
    message (the alert, or the target and its known-good ref) and closed by the verdict as the
    assistant's last message. An exported hunt began with a tool call and ended without saying
    what it found. An imported session is its own: returned as it is."""
    if run.get("kind") == "imported":
        return events
    inp = json.loads(run["input"]) if isinstance(run.get("input"), str) and run["input"] else {}
    t = inp.get("target") or {}
    repo = t.get("repo") or run.get("target") or "the repository"
    task = t.get("summary") or (
        f"Find what made {t.get('metric') or 'the metric'} worse in {repo}"
        + (f" since {str(t['good_ref'])[:10]}" if t.get("good_ref") else "")
        + (f", measured by `{t['command']}`" if t.get("command") else "")
    )
    out = [{"kind": "user", "text": task, "seq": 0, "t": run.get("started"), "payload": None}, *events]
    verdict = json.loads(run["verdict"]) if isinstance(run.get("verdict"), str) and run["verdict"] else None
    if verdict:
        action = verdict.get("proposed_action") or {}
        said = f"{verdict.get('status')}: {verdict.get('summary') or '-'}"
        if action.get("kind") and action.get("kind") != "none":
            said += f"\nProposed: {action.get('detail') or action['kind']} ({action.get('status')})"
        out.append({"kind": "assistant", "text": said, "seq": len(events) + 1, "t": run.get("ended"), "payload": None})
    return out


def to_openai_messages(events: list[dict]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in _turns(events):
        msg: dict[str, Any] = {"role": t["role"], "content": t["text"]}
        if t["calls"]:
            msg["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                for c in t["calls"]
            ]
        out.append(msg)
        for c in t["calls"]:
            if c["result"] is not None:
                out.append({"role": "tool", "tool_call_id": c["id"], "content": c["result"]})
    return out


def to_atif(run: dict, events: list[dict]) -> dict[str, Any]:
    steps = []
    totals = {"prompt": 0, "completion": 0, "cached": 0}
    for i, t in enumerate(_turns(events), 1):
        step: dict[str, Any] = {
            "step_id": i,
            "source": "agent" if t["role"] == "assistant" else t["role"],
            "message": t["text"],
        }
        if t.get("t"):
            step["timestamp"] = datetime.fromtimestamp(t["t"], UTC).isoformat().replace("+00:00", "Z")
        if t["role"] == "assistant" and t.get("model"):
            step["model_name"] = t["model"]
        if t.get("reasoning"):
            step["reasoning_content"] = t["reasoning"]
        if t["calls"]:
            step["tool_calls"] = [
                {
                    "tool_call_id": c["id"],
                    "function_name": c["name"],
                    "arguments": c["args"] if isinstance(c["args"], dict) else {"input": c["args"]},
                }
                for c in t["calls"]
            ]
            results = [
                {"source_call_id": c["id"], "content": c["result"]} for c in t["calls"] if c["result"] is not None
            ]
            if results:
                step["observation"] = {"results": results}
        if t.get("usage"):
            u = t["usage"]
            step["metrics"] = {
                "prompt_tokens": u.get("input", 0),
                "completion_tokens": u.get("output", 0),
                "cached_tokens": u.get("cache_read", 0),
            }
            totals["prompt"] += u.get("input", 0)
            totals["completion"] += u.get("output", 0)
            totals["cached"] += u.get("cache_read", 0)
        steps.append(step)
    agent = run.get("policy") or run.get("kind") or "perf-sleuth"
    return {
        "schema_version": ATIF_VERSION,
        "session_id": run["id"],
        "agent": {
            "name": agent if run.get("kind") == "imported" else "perf-sleuth",
            "version": "imported" if run.get("kind") == "imported" else "0.1",
            **({"model_name": run["model"]} if run.get("model") else {}),
            "extra": {"policy": run.get("policy"), "run_kind": run.get("kind")},
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": totals["prompt"] or run.get("tokens_in") or 0,
            "total_completion_tokens": totals["completion"] or run.get("tokens_out") or 0,
            "total_cached_tokens": totals["cached"],
            "total_steps": len(steps),
        },
    }
