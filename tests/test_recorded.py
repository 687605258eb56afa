"""Logic against recorded worlds (``tests/worlds.py``): each recording replays strictly, every
answer served from it, and must give the same events and the verdict its world's truth says.
Seconds per hunt, no servers, no sleeps: load cannot move them."""

from __future__ import annotations

import json

import pytest

from agent.replay import replay_strict
from tests.worlds import RECORDINGS, WORLDS, load, matches
from transcripts.recording import import_run, read_lines
from transcripts.store import Store


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_a_recorded_world_replays_identically_to_its_truth(tmp_path, name):
    got = load(name, tmp_path / "r.db")
    res = replay_strict(tmp_path / "r.db", got["run"]["id"])
    d = res.divergence or {}
    assert res.identical, (
        f"tests/recordings/{name}.jsonl diverges at event #{d.get('seq')}: expected {d.get('expected')}, "
        f"got {d.get('got')}. If the agent's logic changed on purpose: `python -m tests.worlds {name}`, "
        "then review the recording's diff"
    )
    verdict = json.loads(got["run"]["verdict"])
    assert matches(got["run"]["truth"], res.root_cause, verdict), (got["run"]["truth"], res.root_cause)
    WORLDS[name].check(verdict)


def test_a_world_that_answers_differently_is_a_divergence_naming_the_step(tmp_path):
    """The check can fail: the re-land world with the revert's lookup answering "no revert"
    sends the hunt another way, and the replay says where."""
    got = read_lines(RECORDINGS / "reland.jsonl")
    for e in got["events"]:
        payload = json.loads(e["payload"]) if isinstance(e["payload"], str) else e["payload"]
        if e["kind"] == "tool_result" and (payload or {}).get("name") == "git_reverts_of":
            payload["result"]["result"]["commits"] = []  # the tool record's result
            e["payload"] = json.dumps(payload)
            break
    else:
        raise AssertionError("the recording holds no git_reverts_of answer")
    store = Store(tmp_path / "r.db")
    try:
        import_run(store, got)
    finally:
        store.close()
    res = replay_strict(tmp_path / "r.db", got["run"]["id"])
    assert res.identical is False and res.divergence["seq"] > 0
