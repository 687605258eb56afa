"""The model behind the LLM policy: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
SGLang, Ollama) through the official SDK, with tool calling.

Every request and response is an event (``llm_request`` / ``llm_response``, with the token usage
of each response), so a run can be replayed without the model. The SDK's own retries are off:
this loop retries 429s, 5xx, timeouts and dropped connections with exponential backoff, records
each failed attempt, and after ``max_attempts`` raises ``LLMError`` - which the graph turns into an
``inconclusive`` run, never a traceback. Arguments a model wrote as invalid JSON are kept as
written, with the parse error, so the policy can hand the error back to the model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import openai
from pydantic import BaseModel

EventSink = Callable[[str, str, dict, float | None], None]  # (kind, text, payload, duration_s)
RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)


class LLMError(RuntimeError):
    """The endpoint did not answer usefully within the attempts allowed."""


class LLMConfig(BaseModel):
    model: str
    base_url: str | None = None  # default: $OPENAI_BASE_URL, else OpenAI
    api_key: str | None = None  # default: $OPENAI_API_KEY, else "EMPTY" (local servers)
    timeout_s: float = 120.0
    max_attempts: int = 4
    backoff_s: float = 1.0  # first wait; doubled per attempt


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: Any  # parsed JSON when it parses
    raw_arguments: str
    parse_error: str | None = None


class LLMReply(BaseModel):
    content: str | None
    tool_calls: list[ToolCallOut]
    finish_reason: str | None
    usage: dict[str, int]
    attempts: int


class LLM:
    def __init__(self, cfg: LLMConfig, on_event: EventSink | None = None, sleep: Callable[[float], None] = time.sleep):
        self.cfg, self.on_event, self.sleep = cfg, on_event, sleep
        self.client = openai.OpenAI(
            base_url=cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=cfg.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=cfg.timeout_s,
            max_retries=0,
        )
        self.tokens = {"input": 0, "output": 0}

    def _emit(self, kind: str, text: str, payload: dict, duration: float | None = None) -> None:
        if self.on_event is not None:
            self.on_event(kind, text, payload, duration)

    def chat(self, messages: list[dict], tools: list[dict] | None = None) -> LLMReply:
        last = messages[-1] if messages else {}
        self._emit(
            "llm_request",
            f"{self.cfg.model}: {len(messages)} messages, last {last.get('role')}",
            {"model": self.cfg.model, "messages": messages, "tools": [t["function"]["name"] for t in tools or []]},
        )
        for attempt in range(1, self.cfg.max_attempts + 1):
            t0 = time.perf_counter()
            try:
                resp = self.client.chat.completions.create(
                    model=self.cfg.model, messages=messages, **({"tools": tools} if tools else {})
                )
            except RETRYABLE as exc:
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                self._emit("error", f"LLM attempt {attempt} failed: {why}", {"attempt": attempt, "error": why})
                if attempt == self.cfg.max_attempts:
                    raise LLMError(f"{self.cfg.model}: no answer after {attempt} attempts ({why})") from exc
                self.sleep(self.cfg.backoff_s * 2 ** (attempt - 1))
                continue
            except openai.APIStatusError as exc:  # 400, 401, 404: retrying will not help
                raise LLMError(f"{self.cfg.model}: {exc.status_code} {str(exc)[:200]}") from exc
            return self._reply(resp, attempt, time.perf_counter() - t0)
        raise LLMError("unreachable")  # pragma: no cover

    def _reply(self, resp: Any, attempts: int, took: float) -> LLMReply:
        if not resp.choices:
            raise LLMError(f"{self.cfg.model}: a response with no choices")
        choice = resp.choices[0]
        calls = []
        for c in choice.message.tool_calls or []:
            raw = c.function.arguments or ""
            try:
                args, err = (json.loads(raw) if raw.strip() else {}), None
            except json.JSONDecodeError as exc:
                args, err = None, f"arguments are not valid JSON: {exc.msg} at char {exc.pos}"
            calls.append(ToolCallOut(id=c.id, name=c.function.name, arguments=args, raw_arguments=raw, parse_error=err))
        usage = {
            "input": int(getattr(resp.usage, "prompt_tokens", 0) or 0),
            "output": int(getattr(resp.usage, "completion_tokens", 0) or 0),
        }
        self.tokens["input"] += usage["input"]
        self.tokens["output"] += usage["output"]
        reply = LLMReply(
            content=choice.message.content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=usage,
            attempts=attempts,
        )
        names = ", ".join(c.name for c in calls)
        self._emit(
            "llm_response",
            (reply.content or "")[:200] + (f" [tools: {names}]" if names else ""),
            {"reply": reply.model_dump(), "usage": usage, "model": self.cfg.model},
            took,
        )
        return reply
