"""Logic against recorded worlds (``tests/worlds.py``): each recording replays strictly, every
answer served from it, and must give the same events and the verdict its world's truth says.
Seconds per hunt, no servers, no sleeps: load cannot move them."""

from __future__ import annotations

import json
import math

import pytest

from agent.replay import replay_strict
from tests.worlds import RECORDINGS, WORLDS, imported, load, matches
from transcripts.recording import read_lines


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
    # The replay's own verdict, not the recorded one: a summary's wording or a share's formula is
    # in no event, so only this comparison sees it change (nine recordings once carried verdicts
    # older than the code, and their checks read those).
    stale = list(differences(json.loads(got["run"]["verdict"]), res.verdict))
    assert not stale, (
        f"tests/recordings/{name}.jsonl: the replay's verdict differs from the recorded one at "
        + "; ".join(f"{path}: recorded {a!r:.120}, replayed {b!r:.120}" for path, a, b in stale[:5])
        + f". If the agent's logic changed on purpose: `python -m tests.worlds {name}`, then review the diff"
    )
    assert matches(got["run"]["truth"], res.root_cause, res.verdict), (got["run"]["truth"], res.root_cause)
    WORLDS[name].check(res.verdict)


def test_the_seed_patch_world_never_launches_the_known_good_commit_and_says_why(tmp_path):
    """Clean HEAD gave back 98 % of the drop in the recorded hunt: the known-good commit was left
    out of the clean A/B's experiment and the history left untested, with the numbers."""
    got = load("topk_patch", tmp_path / "r.db")
    verdict = json.loads(got["run"]["verdict"])
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    assert history["status"] == "open" and history["reason"].startswith("not tested: clean HEAD gives back 98%")
    measured = {m["label"] for m in got["measurements"]}
    assert "clean" in measured and "good-candidate" not in measured, measured


def test_a_replay_whose_verdict_says_otherwise_than_its_recording_is_caught(tmp_path):
    """The verdict check can fail: the recording's summary edited (as an older formula or wording
    would have left it) and its events untouched, the replay is identical event for event and its
    own verdict still differs, at the field that changed."""
    got = read_lines(RECORDINGS / "reland.jsonl")
    recorded = json.loads(got["run"]["verdict"])
    recorded["summary"] += " (as an older version worded it)"
    got["run"]["verdict"] = json.dumps(recorded)
    imported(got, tmp_path / "r.db")
    res = replay_strict(tmp_path / "r.db", got["run"]["id"])
    assert res.identical is True
    assert [path for path, _a, _b in differences(recorded, res.verdict)] == [".summary"]


def differences(a, b, path: str = ""):
    """(JSON path, a's value, b's value) wherever two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differences(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield path or ".", a, b


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
    imported(got, tmp_path / "r.db")
    res = replay_strict(tmp_path / "r.db", got["run"]["id"])
    assert res.identical is False and res.divergence["seq"] > 0


def test_an_approved_revert_is_re_measured_beside_head_on_fresh_launches(tmp_path):
    """The re-measurement after an approval is an experiment of its own: HEAD and the landed
    branch, side by side on servers launched for it, none of the confirmation's samples reused
    (it once pooled the branch's 6 confirmation samples with 5 new ones and set them against "now"
    from the hunt's start, and read "108 % of the drop recovered")."""
    got = load("approved", tmp_path / "r.db")
    after = json.loads(got["run"]["verdict"])["after"]
    by_id = {m["mid"]: m for m in got["measurements"]}
    fixed, head = by_id[after["measurement"]], by_id[after["before_measurement"]]
    assert (fixed["label"], head["label"]) == ("after-revert", "HEAD, re-measured")  # beside the Numbers' HEAD
    approval = next(e["seq"] for e in got["events"] if e["kind"] == "approval")
    pair = [
        json.loads(e["payload"])["args"]
        for e in got["events"]
        if e["seq"] > approval and e["kind"] == "tool_call" and e["text"].startswith("measure_pair")
    ]
    assert pair and pair[0]["fresh"] and pair[0]["relaunch"], pair
    earlier = {x for m in got["measurements"] if m["mid"] not in (fixed["mid"], head["mid"]) for x in samples(m)}
    assert samples(fixed) and not set(samples(fixed)) & earlier and not set(samples(head)) & earlier
    assert len(samples(fixed)) == len(samples(head))
    assert after["verdict"] == "different" and after["p_value"] < 0.01 and after["delta_pct"] > 40
    verdict = json.loads(got["run"]["verdict"])
    now, good = verdict["regression"]["bad"], verdict["regression"]["good"]  # the drop as reproduced
    share = math.log(fixed["median"] / head["median"]) / math.log(good / now) * 100  # as explained_pct's
    assert after["recovered_pct_of_drop"] == pytest.approx(share, abs=0.2)


def samples(m: dict) -> list[float]:
    s = m["samples"]
    return json.loads(s) if isinstance(s, str) else s


def test_sleuth_runs_says_where_a_person_stands_on_each_proposal(tmp_path):
    """`sleuth runs` said "concluded" for an approved and a rejected run alike: its action column
    says what was proposed and what a person decided (an external cause has nothing to approve),
    in the table and in ``--json``."""
    from tests.conftest import sleuth_in_process

    db = tmp_path / "r.db"
    approved = load("approved", db)
    rejected = read_lines(RECORDINGS / "reland.jsonl")
    verdict = json.loads(rejected["run"]["verdict"])
    verdict["proposed_action"] |= {"status": "rejected", "reason": "not this week", "branch": None}
    rejected["run"]["verdict"] = json.dumps(verdict)
    imported(rejected, db)
    external = load("external", db)
    lines = sleuth_in_process("runs", "--db", db).stdout.splitlines()
    cols = lines[0].split("\t")
    said = {row[0]: row[cols.index("action")] for row in (line.split("\t") for line in lines[1:])}
    assert said == {
        approved["run"]["id"]: "revert applied",  # approved, and its branch made
        rejected["run"]["id"]: "revert rejected",
        external["run"]["id"]: "investigate",
    }, said
    rows = json.loads(sleuth_in_process("runs", "--db", db, "--json").stdout)
    assert {r["id"]: r["action"] for r in rows} == said


def test_sleuth_show_says_the_proposal_the_decision_and_the_fix_re_measured(tmp_path):
    """`show`'s help promised approvals and its page had none: the proposed action, its status,
    the reason a person gave and the approved fix's fresh A/B, from the verdict."""
    from tests.conftest import sleuth_in_process

    got = load("approved", tmp_path / "r.db")
    after = json.loads(got["run"]["verdict"])["after"]
    text = sleuth_in_process("show", got["run"]["id"], "--db", tmp_path / "r.db").stdout
    section = text.split("## Proposed action", 1)[1].split("## Hypotheses", 1)[0]
    assert "**revert applied** on `sleuth/revert-" in section and "- reason: approved" in section, section
    assert f"- re-measured: HEAD {after['before_median']:.4g} vs the fix {after['median']:.4g}" in section, section
