"""Replay: a recorded run re-executed from its recording (identical, or the first divergence), and
another policy run against the recorded world (answered live from the rebuilt scenario, or not at
all offline), stored as a new run linked to the old."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import sleuth_exe, sleuth_in_process
from tests.worlds import load

NO_WORLD = """
import socket, subprocess

def _refuse(*a, **k):
    raise OSError("the replay tried to reach the world")
socket.socket.connect = _refuse
subprocess.Popen.__init__ = _refuse
"""


def sleuth(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sleuth_exe(), *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def recorded(tmp_path) -> tuple[Path, str]:
    """A real hunt of the small scenario, approved in a second process (the ``approved`` world)."""
    db = tmp_path / "runs.db"
    return db, str(load("approved", db)["run"]["id"])


def test_a_recorded_hunt_replays_identically_without_touching_the_world(recorded, tmp_path):
    db, run = recorded
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_WORLD)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(blocker), "HOME": str(tmp_path)}
    proc = sleuth("replay", run, "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert res["identical"] is True and res["divergence"] is None
    assert res["status"] == "concluded"  # through the recorded approval, the revert and its re-measure
    events = sqlite3.connect(db).execute("select count(*) from events where run = ?", [run]).fetchone()[0]
    assert res["events"] == events
    assert res["served"] > 20


def test_a_changed_recording_reports_the_first_divergence_and_exits_1(recorded, tmp_path):
    db, run = recorded
    copy = tmp_path / "changed.db"
    shutil.copy(db, copy)
    con = sqlite3.connect(copy)
    seq, payload = con.execute(
        "select seq, payload from events where run = ? and kind = 'tool_result' and payload like '%\"measure\"%' "
        "order by seq limit 1",
        [run],
    ).fetchone()
    body = json.loads(payload)
    body["result"]["samples"] = [x * 0.5 for x in body["result"]["samples"]]  # the world answered otherwise
    con.execute("update events set payload = ? where run = ? and seq = ?", [json.dumps(body), run, seq])
    con.commit()
    con.close()
    proc = sleuth_in_process("replay", run, "--db", str(copy))
    assert proc.returncode == 1
    # the answer is served as recorded; the first event that follows from it differs
    first_measurement = (
        sqlite3.connect(copy)
        .execute("select min(seq) from events where run = ? and kind = 'measurement' and seq > ?", [run, seq])
        .fetchone()[0]
    )
    assert f"diverged at event {first_measurement}" in proc.stdout
    assert "expected:" in proc.stdout and "got:" in proc.stdout


def test_replay_of_an_unknown_run_or_policy_is_bad_input(recorded):
    db, run = recorded
    proc = sleuth_in_process("replay", "no-such-run", "--db", str(db))
    assert proc.returncode == 2 and "RUN: no run 'no-such-run'" in proc.stderr
    proc = sleuth_in_process("replay", run, "--policy", "psychic", "--db", str(db))
    assert proc.returncode == 2 and "--policy: unknown policy 'psychic'" in proc.stderr


def test_another_policy_against_the_recorded_world(tmp_path):
    """A bisect-only hunt is recorded (the ``bisect_only`` world: its spec stored beside the run,
    its world gone); the methodical policy asks more (nvidia-smi, the env, git status): offline
    that ends the replay, live it is answered by the scenario rebuilt from its spec, and both
    replays are runs linked to the recording."""
    db = tmp_path / "runs.db"
    got = load("bisect_only", db)
    run, culprit = str(got["run"]["id"]), got["run"]["truth"]["ref"]

    proc = sleuth_in_process("replay", run, "--policy", "methodical", "--offline", "--db", str(db), "--json")
    assert proc.returncode == 1
    offline = json.loads(proc.stdout)
    assert offline["status"] == "failed" and offline["error"].startswith("--offline: the recording cannot answer")

    proc = sleuth_in_process("replay", run, "--policy", "methodical", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    live = json.loads(proc.stdout)
    assert live["root_cause"] == {"kind": "commit", "ref": culprit}
    assert live["live"] > 0 and live["served"] > 0
    # What the new run wrote: its events and its verdict (they read 0 and null).
    assert live["events"] > 50 and live["verdict"]["root_cause"]["ref"] == culprit

    runs = {r["id"]: r for r in json.loads(sleuth_in_process("runs", "--json", "--db", str(db)).stdout)}
    for replay in (offline, live):
        assert runs[replay["new_run"]]["parent_run"] == run
        assert runs[replay["new_run"]]["policy"] == "methodical"
    assert runs[live["new_run"]]["status"] == "awaiting_approval"
    # Its target is the rebuilt world's repository, as its verdict says (it showed the recording's).
    assert runs[live["new_run"]]["target"] == live["verdict"]["target"]["repo"]
    # The rebuilt world is the new run's, in its folder beside the store (an approval reverts in
    # its repository); an offline replay built none and leaves none.
    from transcripts.store import layout

    show = json.loads(sleuth_in_process("show", live["new_run"], "--json", "--db", str(db)).stdout)["run"]
    assert Path(show["scenario"]).is_relative_to(layout(db).runs / live["new_run"] / "world"), show["scenario"]
    assert Path(show["scenario"], "repo", ".git").exists()
    assert show["launch_scale"] == 0.02  # the rebuilt world's, kept for a replay of this run in turn
    assert not (layout(db).runs / offline["new_run"] / "world").exists()
    verdict = json.loads(sleuth_in_process("show", live["new_run"], "--json", "--db", str(db)).stdout)["run"]["verdict"]
    assert {h["category"] for h in verdict["hypotheses"]} >= {"history", "uncommitted"}


def test_a_hunt_exports_as_openai_messages_and_atif(recorded, tmp_path):
    db, run = recorded
    proc = sleuth_in_process("export", run, "--format", "openai-messages", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    msgs = json.loads(proc.stdout)
    calls = [c for m in msgs for c in m.get("tool_calls", [])]
    answered = {m["tool_call_id"] for m in msgs if m["role"] == "tool"}
    assert {c["function"]["name"] for c in calls} >= {"measure", "git_show_stat", "git_land_revert"}
    assert {c["id"] for c in calls} == answered  # every observation answered
    assert any("[hypothesis]" in (m["content"] or "") for m in msgs)
    # Opened by its task (the alert) and closed by its verdict: it began with a tool call and
    # ended without saying what it found.
    verdict = json.loads(sleuth_in_process("show", run, "--json", "--db", str(db)).stdout)["run"]["verdict"]
    assert msgs[0]["role"] == "user" and "tok/s" in msgs[0]["content"], msgs[0]
    assert msgs[-1]["role"] == "assistant" and verdict["summary"] in msgs[-1]["content"], msgs[-1]
    proc = sleuth_in_process("export", run, "--format", "atif", "--db", str(db))
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == "ATIF-v1.4" and doc["agent"]["name"] == "perf-sleuth"
    assert doc["steps"][0]["source"] == "user" and verdict["summary"] in doc["steps"][-1]["message"]
    assert sum(len(s.get("tool_calls", [])) for s in doc["steps"]) == len(calls)


def test_the_recorded_world_serves_a_three_state_experiment_and_its_samples_to_other_questions():
    from transcripts.cassette import Cassette

    arms = [{"ref": r, "launch": "serve"} for r in ("now", "clean", "good")]
    arms[1]["env"] = {"NCCL_PROTO": ""}
    result = {"arms": [{"samples": [v] * 4, "verify_ms": []} for v in (60.0, 61.0, 90.0)], "groups": [[4], [2, 2], [4]]}
    call = {"name": "measure_arms", "args": {"arms": arms, "samples": 4, "fresh": True}}
    events = [
        {"seq": 1, "kind": "tool_call", "payload": call},
        {"seq": 2, "kind": "tool_result", "payload": {"name": "measure_arms", "result": result, "error": None}},
    ]
    world = Cassette(events, strict=False)
    # Another policy asks for the same experiment: the recorded samples, state by state.
    got = world.answer("measure_arms", {"arms": arms, "samples": 4, "fresh": True})
    assert [a["samples"] for a in got.result["arms"]] == [[60.0] * 4, [61.0] * 4, [90.0] * 4]
    # Those samples are handed out: a fresh A/B of two of the states asks for new ones, which the
    # recording does not hold (offline: unanswerable; live: measured).
    again = {"a": arms[2], "b": arms[1], "samples": 2, "fresh": True}
    with pytest.raises(Exception, match="cannot answer measure_pair"):
        world.answer("measure_pair", again)
    # A policy that never asked for the experiment gets its samples as a fresh A/B.
    other = Cassette(events, strict=False)
    pair = other.answer("measure_pair", again)
    assert pair.result["a"]["samples"] == [90.0, 90.0] and pair.result["b"]["samples"] == [61.0, 61.0]


def test_the_recorded_world_serves_a_call_on_the_recorded_path_whole_with_its_groups_and_costs():
    """A pooled answer holds samples only; a policy that asks what the recorded one asked must get
    what it got (launch groups and costs decide whether a launch-aware test applies), or it goes
    down another path on the same numbers (seen: an LLM replay that took one A/B round where the
    recording took two, then asked for a revert the recording never prepared)."""
    from transcripts.cassette import Cassette

    a, b = {"ref": "good", "launch": "serve"}, {"ref": "now", "launch": "serve"}
    side = {"samples": [90.0, 91.0, 89.0, 90.0], "verify_ms": [18.9] * 4}
    result = {"a": side, "b": {**side, "samples": [60.0, 61.0, 59.0, 60.0]}, "groups": [[2, 2], [2, 2]],
              "cost": {"launches": 4, "samples": 8}}  # fmt: skip
    call = {"name": "measure_pair", "args": {"a": a, "b": b, "samples": 4, "fresh": True}}
    events = [
        {"seq": 1, "kind": "tool_call", "payload": call},
        {"seq": 2, "kind": "tool_result", "payload": {"name": "measure_pair", "result": result, "error": None}},
    ]
    same = Cassette(events, strict=False).answer("measure_pair", call["args"])
    assert same.result == result
    # Half the samples is another question: the pool answers it, with nothing it did not measure.
    half = Cassette(events, strict=False).answer("measure_pair", {**call["args"], "samples": 2})
    pooled = {"a": {"samples": [90.0, 91.0], "verify_ms": []}, "b": {"samples": [60.0, 61.0], "verify_ms": []}}
    assert half.result == pooled


def test_the_recorded_world_leaves_out_the_arm_its_experiment_left_out_and_serves_fresh_samples_after_the_rest():
    from transcripts.cassette import Cassette

    arms = [{"ref": r, "launch": "serve"} for r in ("now", "clean", "good")]
    result = {"arms": [{"samples": [60.0] * 4, "verify_ms": []}, {"samples": [90.0] * 4, "verify_ms": []}, None],
              "groups": [[4], [2, 2], []]}  # fmt: skip
    args = {"arms": arms, "samples": 4, "fresh": True, "other_if_needed": True}
    fresh_one = {"ref": "clean", "launch": "serve", "samples": 2, "fresh": True}
    events = [
        {"seq": 1, "kind": "tool_call", "payload": {"name": "measure_arms", "args": args}},
        {"seq": 2, "kind": "tool_result", "payload": {"name": "measure_arms", "result": result, "error": None}},
        {"seq": 3, "kind": "tool_call", "payload": {"name": "measure", "args": fresh_one}},
        {"seq": 4, "kind": "tool_result", "payload": {"name": "measure", "result": {"samples": [91.0, 92.0]},
                                                       "error": None}},
    ]  # fmt: skip
    world = Cassette(events, strict=False)
    got = world.answer("measure_arms", args)
    assert got.result["arms"][2] is None and got.result["arms"][1]["samples"] == [90.0] * 4
    # A fresh measurement of one state is the samples after those already handed out.
    assert world.answer("measure", fresh_one).result["samples"] == [91.0, 92.0]


def test_a_world_is_rebuilt_at_the_launch_scale_it_was_built_with_not_the_replays(tmp_path, monkeypatch):
    """A trial's replay under another policy rebuilt an evaluation's world at the scale of its own
    environment (1: 50 s launches) where the run had been built at 0.02: 157 s against 50."""
    import textwrap

    from agent.replay import _rebuild
    from evals.lab.builder import build, built_launch_scale
    from evals.lab.spec import load_spec
    from tests.test_eval import LOUD

    spec = tmp_path / "tiny.toml"
    spec.write_text(textwrap.dedent(LOUD))
    first = build(load_spec(spec), tmp_path / "first", launch_scale=0.05)
    assert built_launch_scale(first.root) == 0.05
    # the run row keeps it (``Hunter.start`` with a built scenario), and the rebuild uses it
    monkeypatch.setenv("SLEUTH_LAB_LAUNCH_SCALE", "1")
    row = {"spec": spec.read_text(), "scenario": str(first.root), "launch_scale": 0.05}
    new_root, _old = _rebuild(row, tmp_path / "again")
    assert built_launch_scale(new_root) == 0.05
    profile = Path(new_root, "host", "site-packages", "minitorch", "_profile.json")
    assert (
        json.loads(profile.read_text())["launch"]
        == json.loads(Path(first.root, "host", "site-packages", "minitorch", "_profile.json").read_text())["launch"]
    )
