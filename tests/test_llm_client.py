"""The LLM client of the LLM policy, against a scripted OpenAI-compatible server over real HTTP
with the real SDK: tool calls parsed, bad JSON kept with its error, 429 / 500 / timeouts retried
with backoff (each failed attempt kept in the reply), then a clear LLMError; token usage per response."""

from __future__ import annotations

import pytest

from agent.llm import LLM, LLMConfig, LLMError
from tests.llm_server import ScriptedLLM

TOOLS = [{"type": "function", "function": {"name": "git_reflog", "parameters": {"type": "object", "properties": {}}}}]


def client(server: ScriptedLLM, **kw) -> LLM:
    cfg = LLMConfig(model="scripted-1", base_url=server.base_url, api_key="test-key", backoff_s=0.01, **kw)
    return LLM(cfg)


def test_a_tool_call_comes_back_parsed_with_its_token_usage():
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
        reply = client(s).chat([{"role": "user", "content": "tok/s fell"}], TOOLS)
        assert s.requests[0]["tools"][0]["function"]["name"] == "git_reflog"
        assert s.requests[0]["model"] == "scripted-1"
    assert reply.tool_calls[0].name == "git_reflog" and reply.tool_calls[0].arguments == {"limit": 20}
    assert reply.content == "Check the reflog first." and reply.finish_reason == "tool_calls"
    assert reply.usage == {"input": 812, "output": 31} and reply.attempts == 1 and reply.attempt_errors == []


def test_invalid_json_arguments_are_kept_with_the_parse_error():
    with ScriptedLLM([{"tool_calls": [("git_reflog", '{"limit": 20')]}]) as s:
        call = client(s).chat([{"role": "user", "content": "go"}], TOOLS).tool_calls[0]
    assert call.arguments is None and call.raw_arguments == '{"limit": 20'
    assert call.parse_error.startswith("arguments are not valid JSON")


def test_429_and_500_are_retried_and_each_failure_is_kept():
    with ScriptedLLM([{"status": 429}, {"status": 500}, {"content": "ok"}]) as s:
        reply = client(s).chat([{"role": "user", "content": "go"}])
        assert len(s.requests) == 3
    assert reply.content == "ok" and reply.attempts == 3
    assert [e.split(":")[0] for e in reply.attempt_errors] == ["RateLimitError", "InternalServerError"]


def test_a_timeout_is_retried_then_the_run_gets_a_clear_error():
    with (
        ScriptedLLM([{"delay": 1.0}, {"delay": 1.0}]) as s,
        pytest.raises(LLMError, match="no answer after 2 attempts") as err,
    ):
        client(s, timeout_s=0.3, max_attempts=2).chat([{"role": "user", "content": "go"}])
    assert [e.split(":")[0] for e in err.value.attempt_errors] == ["APITimeoutError", "APITimeoutError"]


def test_a_400_is_not_retried():
    with ScriptedLLM([{"status": 400}, {"content": "never"}]) as s, pytest.raises(LLMError, match="400"):
        client(s).chat([{"role": "user", "content": "go"}])
    assert len(s.requests) == 1
