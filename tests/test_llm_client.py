"""The LLM client of the LLM policy, against a scripted OpenAI-compatible server over real HTTP
with the real SDK: tool calls parsed, bad JSON kept with its error, 429 / 500 / timeouts retried
with backoff and recorded, then a clear LLMError; token usage per response."""

from __future__ import annotations

import pytest

from agent.llm import LLM, LLMConfig, LLMError
from tests.llm_server import ScriptedLLM

TOOLS = [{"type": "function", "function": {"name": "git_reflog", "parameters": {"type": "object", "properties": {}}}}]


def client(server: ScriptedLLM, events: list, **kw) -> LLM:
    cfg = LLMConfig(model="scripted-1", base_url=server.base_url, api_key="test-key", backoff_s=0.01, **kw)
    return LLM(cfg, on_event=lambda kind, text, payload, took: events.append((kind, payload)))


def test_a_tool_call_comes_back_parsed_and_both_sides_are_recorded():
    events: list = []
    with ScriptedLLM(
        [
            {
                "content": "Check the reflog first.",
                "tool_calls": [("git_reflog", '{"limit": 20}')],
                "prompt_tokens": 812,
                "completion_tokens": 31,
            }
        ]
    ) as s:
        reply = client(s, events).chat([{"role": "user", "content": "tok/s fell"}], TOOLS)
        assert s.requests[0]["tools"][0]["function"]["name"] == "git_reflog"
    assert reply.tool_calls[0].name == "git_reflog" and reply.tool_calls[0].arguments == {"limit": 20}
    assert reply.usage == {"input": 812, "output": 31} and reply.attempts == 1
    assert [k for k, _ in events] == ["llm_request", "llm_response"]
    assert events[1][1]["usage"] == {"input": 812, "output": 31}


def test_invalid_json_arguments_are_kept_with_the_parse_error():
    events: list = []
    with ScriptedLLM([{"tool_calls": [("git_reflog", '{"limit": 20')]}]) as s:
        call = client(s, events).chat([{"role": "user", "content": "go"}], TOOLS).tool_calls[0]
    assert call.arguments is None and call.raw_arguments == '{"limit": 20'
    assert call.parse_error.startswith("arguments are not valid JSON")


def test_429_and_500_are_retried_with_each_failure_recorded():
    events: list = []
    with ScriptedLLM([{"status": 429}, {"status": 500}, {"content": "ok"}]) as s:
        reply = client(s, events).chat([{"role": "user", "content": "go"}])
        assert len(s.requests) == 3
    assert reply.content == "ok" and reply.attempts == 3
    assert [k for k, _ in events] == ["llm_request", "error", "error", "llm_response"]


def test_a_timeout_is_retried_then_the_run_gets_a_clear_error():
    events: list = []
    with (
        ScriptedLLM([{"delay": 1.0}, {"delay": 1.0}]) as s,
        pytest.raises(LLMError, match="no answer after 2 attempts"),
    ):
        client(s, events, timeout_s=0.3, max_attempts=2).chat([{"role": "user", "content": "go"}])
    assert [k for k, _ in events] == ["llm_request", "error", "error"]


def test_a_400_is_not_retried():
    with ScriptedLLM([{"status": 400}, {"content": "never"}]) as s, pytest.raises(LLMError, match="400"):
        client(s, []).chat([{"role": "user", "content": "go"}])
    assert len(s.requests) == 1
