"""The lab server speaks the OpenAI API well enough for the official SDK, unchanged, to use it."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import openai
import pytest

from tools.server import launch


@pytest.fixture(scope="module")
def server(seed_scenario, tmp_path_factory):
    alert = json.loads((seed_scenario.root / "alert.json").read_text())
    log = tmp_path_factory.mktemp("logs") / "server.log"
    with launch(alert["commonAnnotations"]["launch_command"], seed_scenario.repo, log) as srv:
        yield srv


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="EMPTY", max_retries=0, timeout=60) as c:
        yield c


def test_health_and_models(server, client):
    with urllib.request.urlopen(f"{server.base_url}/health") as resp:
        assert resp.status == 200
    assert [m.id for m in client.models.list()] == ["Kimi-K2.5"]


def test_completion_without_streaming_reports_usage(client):
    resp = client.completions.create(model="Kimi-K2.5", prompt="Hello there", max_tokens=12)
    assert resp.object == "text_completion"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 12
    assert resp.usage.prompt_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 12
    assert len(resp.choices[0].text.split()) == 12


def test_streamed_completion_ends_with_usage_and_done(client):
    stream = client.completions.create(
        model="Kimi-K2.5", prompt="Hi", max_tokens=10, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)  # the SDK stops at data: [DONE]
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert chunks[-1].usage.completion_tokens == 10
    assert len("".join(texts).split()) == 10
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_chat_completion_streaming_and_not(client):
    msgs = [{"role": "user", "content": "Say something about experts."}]
    whole = client.chat.completions.create(model="Kimi-K2.5", messages=msgs, max_tokens=8)
    assert whole.choices[0].message.role == "assistant"
    assert len(whole.choices[0].message.content.split()) == 8
    chunks = list(client.chat.completions.create(model="Kimi-K2.5", messages=msgs, max_tokens=8, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len("".join(c.choices[0].delta.content or "" for c in chunks).split()) == 8


def test_bad_requests_get_openai_style_errors(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="Kimi-K2.5", prompt="x", max_tokens=0)
    assert "max_tokens" in str(err.value)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="Kimi-K2.5", messages=[], max_tokens=4)


def test_the_log_has_the_server_args_and_running_it_left_the_checkout_untouched(server, seed_scenario, client):
    client.completions.create(model="Kimi-K2.5", prompt="warm", max_tokens=4)
    log = server.log()
    assert log.ready
    assert log.server_args["attention_backend"] == "triton"
    assert log.server_args["speculative_algorithm"] == "EAGLE3"
    status = subprocess.run(
        ["git", "-C", str(seed_scenario.repo), "status", "--porcelain", "--ignored"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "__pycache__" not in status and "??" not in status
