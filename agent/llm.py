"""The model behind the LLM policy: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
SGLang, Ollama) through the official SDK, with tool calling.

The SDK's own retries are off: this loop retries 429s, 5xx, timeouts and dropped connections
with exponential backoff (or after the wait the server asks for in ``retry-after``), keeps each
failed attempt's error in the reply (``attempt_errors``), and after ``max_attempts`` raises
``LLMError`` - which the graph turns into an ``inconclusive`` run, never a traceback. Arguments a
model wrote as invalid JSON are kept as written, with the parse error, so the policy can hand the
error back to the model. The client records nothing itself: ``Runtime.chat`` records each call as
an ``llm_request`` / ``llm_response`` event pair (token usage on the response), the same way every
other observation is recorded, so a replay can serve it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from tools.text import first_line

# The openai SDK is imported where a client is made, not with this module: it is a second of CPU
# at every start of the CLI (agent.runtime imports this module), and most commands ask no model.
RETRYABLE = ("RateLimitError", "InternalServerError", "APITimeoutError", "APIConnectionError")


class LLMError(RuntimeError):
    """The endpoint did not answer usefully within the attempts allowed."""

    def __init__(self, message: str, attempt_errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.attempt_errors = attempt_errors or []


class LLMDeadline(LLMError):
    """The hunt's wall-time budget ran out before the endpoint answered (a hung server, retries):
    the runtime ends the run on its budget, as a probe stopped at the deadline does."""


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
    attempt_errors: list[str] = []  # the failed attempts before this answer


def _wait(exc: Exception, backoff: float) -> float:
    """The server's own hint (``retry-after-ms`` as OpenAI sends it, or ``retry-after`` seconds),
    capped at a minute; else the exponential backoff."""
    response = getattr(exc, "response", None)
    headers = response.headers if response is not None else {}
    try:
        if "retry-after-ms" in headers:
            return min(60.0, float(headers["retry-after-ms"]) / 1000)
        if "retry-after" in headers:
            return min(60.0, float(headers["retry-after"]))
    except ValueError:
        pass
    return backoff


class LLM:
    def __init__(self, cfg: LLMConfig, sleep: Callable[[float], None] = time.sleep):
        import openai

        self.cfg, self.sleep = cfg, sleep
        self.client = openai.OpenAI(
            base_url=cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=cfg.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=cfg.timeout_s,
            max_retries=0,
        )

    def chat(self, messages: list[dict], tools: list[dict] | None = None, deadline: float | None = None) -> LLMReply:
        """One answer. ``deadline`` (a ``time.time()``): no attempt waits past it, nor does a
        backoff; past it ``LLMDeadline`` (a hung endpoint held a 60 s hunt for 490 s: four
        attempts of the per-request timeout, with backoff)."""
        import openai

        retryable = tuple(getattr(openai, name) for name in RETRYABLE)
        errors: list[str] = []
        for attempt in range(1, self.cfg.max_attempts + 1):
            timeout = self._left(deadline, errors)
            try:
                resp = self.client.chat.completions.create(
                    model=self.cfg.model, messages=messages, timeout=timeout, **({"tools": tools} if tools else {})
                )
            except retryable as exc:
                errors.append(f"{type(exc).__name__}: {first_line(str(exc), 200)}")
                if attempt == self.cfg.max_attempts:
                    raise LLMError(
                        f"{self.cfg.model}: no answer after {attempt} attempts ({errors[-1]})", errors
                    ) from exc
                wait = _wait(exc, self.cfg.backoff_s * 2 ** (attempt - 1))
                self.sleep(min(wait, self._left(deadline, errors)))
                continue
            except openai.APIStatusError as exc:  # 400, 401, 404: retrying will not help
                errors.append(f"{exc.status_code} {str(exc)[:200]}")
                raise LLMError(f"{self.cfg.model}: {errors[-1]}", errors) from exc
            except (ValueError, TypeError, AttributeError) as exc:  # 200, but no chat completion (HTML, text)
                raise self._not_a_completion(exc, errors) from exc
            try:
                return self._reply(resp, attempt, errors)
            except (TypeError, AttributeError) as exc:
                raise self._not_a_completion(exc, errors) from exc
        raise LLMError("unreachable")  # pragma: no cover

    def _not_a_completion(self, exc: Exception, errors: list[str]) -> LLMError:
        """An answer the SDK could not read as a chat completion (a proxy's HTML page, a wrong
        ``--base-url``): not retried, the endpoint named (it was a bare JSONDecodeError)."""
        errors.append(f"not a chat completion ({type(exc).__name__}: {first_line(str(exc), 120)})")
        return LLMError(f"{self.cfg.model} at {self.client.base_url}: the answer is {errors[-1]}", errors)

    def _left(self, deadline: float | None, errors: list[str]) -> float:
        """The time an attempt (or a backoff) may take: the per-request timeout, cut to what is
        left before ``deadline``; ``LLMDeadline`` when nothing is."""
        if deadline is None:
            return self.cfg.timeout_s
        left = deadline - time.time()
        if left <= 0:
            last = f" (last: {errors[-1]})" if errors else ""
            raise LLMDeadline(f"{self.cfg.model}: no answer before the wall-time budget ran out{last}", errors)
        return min(self.cfg.timeout_s, left)

    def _reply(self, resp: Any, attempts: int, errors: list[str]) -> LLMReply:
        if not resp.choices:
            raise LLMError(f"{self.cfg.model}: a response with no choices", errors)
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
        return LLMReply(
            content=choice.message.content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=usage,
            attempts=attempts,
            attempt_errors=errors,
        )
