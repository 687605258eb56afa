"""`sleuth import` and `sleuth export`: real sessions of other agents (tests/fixtures/transcripts,
sources and licences in its README) become runs of kind `imported`, and runs go back out as OpenAI
messages or ATIF."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import sleuth_in_process
from transcripts.imports import detect, read_session

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
CLAUDE = FIXTURES / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
OPENCODE = FIXTURES / "opencode" / "session__neon-river__ses_39b623ce7ffeILPe9UgDcyGicH.json"
SEED = Path(__file__).parents[1] / "transcripts" / "examples" / "seed_session.json"

REAL = {
    CLAUDE: "claude-code",
    FIXTURES / "opencode" / "session__jolly-eagle__ses_39b5d713cffeRgAoxPIwS3Plus.json": "opencode",
    OPENCODE: "opencode",
    FIXTURES / "swe-agent" / "function_calling_simple.traj": "swe-agent",
    FIXTURES / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.gpt4.traj": "swe-agent",
    FIXTURES / "mini-swe-agent" / "calc_fix.traj.json": "mini-swe-agent",
    FIXTURES / "mini-swe-agent" / "count_files.traj.json": "mini-swe-agent",
    SEED: "openai-messages",
}


def sleuth(*args: str):
    return sleuth_in_process(*args)


def events(db: Path, run: str) -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from events where run = ? order by seq", [run])]


@pytest.mark.parametrize("path", list(REAL), ids=lambda p: p.name[:30])
def test_every_session_imports_with_its_format_detected(path, tmp_path):
    db = tmp_path / "runs.db"
    proc = sleuth("import", str(path), "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout)
    assert res["format"] == REAL[path] and res["skipped"] == 0 and res["new"]
    evs = events(db, res["run_id"])
    assert len(evs) == res["events"] > 3
    assert {e["kind"] for e in evs} <= {"system", "user", "assistant", "reasoning", "tool_call", "tool_result"}
    assert all(json.loads(e["payload"])["raw"] is not None for e in evs)  # the native record, beside each event
    calls = [json.loads(e["payload"])["call_id"] for e in evs if e["kind"] == "tool_call"]
    results = [json.loads(e["payload"])["call_id"] for e in evs if e["kind"] == "tool_result"]
    assert calls and sorted(calls) == sorted(results)  # every call answered, by id
    run = json.loads(sleuth("show", res["run_id"], "--db", str(db), "--json").stdout)["run"]
    assert run["kind"] == "imported"


def test_claude_code_usage_counts_each_response_once_from_its_last_line():
    """One response is written as several lines (one per content block) sharing ``message.id``,
    each with the output count so far: 8 tokens on a text block's line, 322 on the line of the
    tool call that ends the same response. The response counts once, its last line's count (the
    first line's made this session 268 output tokens where it spent 953)."""
    lines = [json.loads(x) for x in CLAUDE.read_text().splitlines()]
    by_response = {}
    for line in lines:
        msg = line.get("message")
        if line.get("type") == "assistant" and isinstance(msg, dict) and msg.get("usage"):
            by_response[msg["id"]] = msg["usage"]  # a later line of the response carries its count so far
    assert len(by_response) < sum(1 for x in lines if x.get("type") == "assistant")
    expected_out = sum(u["output_tokens"] for u in by_response.values())
    s = read_session(CLAUDE)
    assert s.tokens()["output"] == expected_out == 953
    assert s.model == "claude-sonnet-4-20250514" and s.steps[0].t is not None
    assert [x.tool for x in s.steps if x.kind == "tool_call"][:3] == ["TodoWrite", "Bash", "Glob"]


def test_opencode_tool_parts_become_a_call_and_its_result():
    s = read_session(OPENCODE)
    assert sum(1 for x in s.steps if x.kind == "tool_call") == 15  # the 15 tool parts of the session
    assert s.tokens()["input"] > 0 and s.session_id == "ses_39b623ce7ffeILPe9UgDcyGicH"


def _as_storage_tree(export: dict, root: Path) -> None:
    """The same session as opencode < 1.2 stored it: one JSON file per object."""
    info = export["info"]
    (root / "session" / info["projectID"]).mkdir(parents=True)
    (root / "session" / info["projectID"] / f"{info['id']}.json").write_text(json.dumps(info))
    for m in export["messages"]:
        mdir = root / "message" / info["id"]
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"{m['info']['id']}.json").write_text(json.dumps(m["info"]))
        pdir = root / "part" / m["info"]["id"]
        pdir.mkdir(parents=True, exist_ok=True)
        for p in m["parts"]:
            (pdir / f"{p['id']}.json").write_text(json.dumps(p))


def _as_sqlite(export: dict, db: Path) -> None:
    """The same session as opencode >= 1.2 stores it: opencode.db, a JSON ``data`` column per row."""
    con = sqlite3.connect(db)
    con.execute("create table session (id text primary key, title text, time_created integer, data text)")
    times = "time_created integer, time_updated integer, data text"
    con.execute(f"create table message (id text primary key, session_id text, {times})")
    con.execute(f"create table part (id text primary key, message_id text, session_id text, {times})")
    info = export["info"]
    con.execute(
        "insert into session values (?, ?, ?, ?)",
        [info["id"], info["title"], info["time"]["created"], json.dumps(info)],
    )
    con.execute("insert into session values ('ses_other', 'another session', 0, '{}')")
    for m in export["messages"]:
        mi = m["info"]
        con.execute(
            "insert into message values (?, ?, ?, ?, ?)",
            [
                mi["id"],
                info["id"],
                mi["time"]["created"],
                mi["time"]["created"],
                json.dumps({k: v for k, v in mi.items() if k != "id"}),
            ],
        )
        for p in m["parts"]:
            con.execute(
                "insert into part values (?, ?, ?, ?, ?, ?)",
                [p["id"], mi["id"], info["id"], mi["time"]["created"], 0, json.dumps(p)],
            )
    con.commit()
    con.close()


def _shape(path: Path, session: str | None = None) -> list[tuple]:
    return [(x.kind, x.tool, x.call_id, x.text) for x in read_session(path, session_id=session).steps]


def test_opencode_storage_tree_and_sqlite_db_read_like_the_export(tmp_path):
    export = json.loads(OPENCODE.read_text())
    _as_storage_tree(export, tmp_path / "storage")
    _as_sqlite(export, tmp_path / "opencode.db")
    assert detect(tmp_path / "storage") == "opencode" and detect(tmp_path / "opencode.db") == "opencode"
    want = _shape(OPENCODE)
    assert _shape(tmp_path / "storage") == want
    assert _shape(tmp_path / "opencode.db", "ses_39b623ce7ffeILPe9UgDcyGicH") == want
    # a database of two sessions needs to be told which
    proc = sleuth("import", str(tmp_path / "opencode.db"), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "--session:" in proc.stderr and "2 sessions" in proc.stderr
    proc = sleuth(
        "import",
        str(tmp_path / "opencode.db"),
        "--session",
        "ses_39b623ce7ffeILPe9UgDcyGicH",
        "--db",
        str(tmp_path / "r.db"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    # The same session from its three sources is one run (each source's records differ in shape).
    first = json.loads(proc.stdout)
    for source in (OPENCODE, tmp_path / "storage"):
        again = json.loads(sleuth("import", str(source), "--db", str(tmp_path / "r.db"), "--json").stdout)
        assert again["run_id"] == first["run_id"] and again["new"] is False, again


def test_mini_swe_agent_text_actions_become_bash_calls_with_their_output():
    s = read_session(FIXTURES / "mini-swe-agent" / "calc_fix.traj.json")
    calls = [x for x in s.steps if x.kind == "tool_call"]
    assert calls[0].args["command"] == "cat calc.py"
    outputs = [x for x in s.steps if x.kind == "tool_result"]
    assert len(outputs) == 3 and "def div" in outputs[0].text and s.model == "gpt-4o-mini"
    s11 = read_session(FIXTURES / "mini-swe-agent" / "count_files.traj.json")
    assert s11.tokens() == {"input": 812 + 870, "output": 24 + 11, "cache_read": 0}


def test_a_broken_line_is_named_and_skip_bad_imports_the_rest(tmp_path):
    lines = CLAUDE.read_text().splitlines()
    lines[2] = lines[2][:40]  # cut mid-object
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    db = tmp_path / "r.db"
    proc = sleuth("import", str(broken), "--format", "claude-code", "--db", str(db))
    assert proc.returncode == 2 and proc.stderr.strip().startswith(f"error: {broken}:3: invalid JSON")
    assert not db.exists() or sleuth("runs", "--json", "--db", str(db)).stdout.strip() == "[]"
    proc = sleuth("import", str(broken), "--format", "claude-code", "--skip-bad", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["skipped"] == 1 and res["problems"][0].startswith(f"{broken}:3:") and res["events"] > 20


def test_a_bad_field_is_named(tmp_path):
    doc = json.loads(SEED.read_text())
    doc["messages"][2]["role"] = "robot"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    proc = sleuth("import", str(bad), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2
    assert "bad.json: messages[2]: role 'robot' is not system, user, assistant or tool" in proc.stderr
    proc = sleuth("import", str(bad), "--format", "pdf", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "--format: unknown format 'pdf'" in proc.stderr
    proc = sleuth("import", str(tmp_path / "nope.json"), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "nope.json: no such file" in proc.stderr


def test_importing_twice_is_one_run(tmp_path):
    db = tmp_path / "r.db"
    first = json.loads(sleuth("import", str(CLAUDE), "--db", str(db), "--json").stdout)
    again = json.loads(sleuth("import", str(CLAUDE), "--db", str(db), "--json").stdout)
    assert again["run_id"] == first["run_id"] and not again["new"]
    assert len(events(db, first["run_id"])) == first["events"]


def test_openai_messages_go_out_as_they_came_in(tmp_path):
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(SEED), "--db", str(db), "--json").stdout)["run_id"]
    proc = sleuth("export", run, "--format", "openai-messages", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    original = json.loads(SEED.read_text())["messages"]

    def norm(msgs):
        return [
            (
                m["role"],
                m.get("content") or "",
                [
                    (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                    for c in m.get("tool_calls", [])
                ],
                m.get("tool_call_id"),
            )
            for m in msgs
        ]

    assert norm(out) == norm(original)


def test_atif_export_of_an_imported_session(tmp_path):
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(OPENCODE), "--db", str(db), "--json").stdout)
    path = tmp_path / "t.json"
    assert sleuth("export", run["run_id"], "--format", "atif", "--out", str(path), "--db", str(db)).returncode == 0
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == "ATIF-v1.4" and doc["agent"]["name"] == "opencode"
    assert [s["step_id"] for s in doc["steps"]] == list(range(1, len(doc["steps"]) + 1))
    assert {s["source"] for s in doc["steps"]} <= {"system", "user", "agent"}
    calls = [c for s in doc["steps"] for c in s.get("tool_calls", [])]
    results = [r for s in doc["steps"] for r in s.get("observation", {}).get("results", [])]
    assert len(calls) == 15 and {r["source_call_id"] for r in results} == {c["tool_call_id"] for c in calls}
    assert doc["final_metrics"]["total_prompt_tokens"] == run["tokens"]["input"]
    assert doc["final_metrics"]["total_completion_tokens"] == run["tokens"]["output"]


def test_a_file_with_no_step_of_a_session_is_bad_input_not_an_empty_run(tmp_path):
    """'[]', or another format's file read leniently, imported as a run of 0 events (exit 0), and a
    second such file was then 'already imported' as the first: both were keyed by empty content."""
    (tmp_path / "x.json").write_text("[]")
    (tmp_path / "other.json").write_text('{"a": 1}')
    db = tmp_path / "r.db"
    for name, fmt in (("x.json", []), ("other.json", ["--format", "claude-code"])):
        proc = sleuth("import", str(tmp_path / name), *fmt, "--db", str(db))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (
            proc.stderr.strip().startswith(f"error: PATH: {tmp_path / name}: no step of a ")
            and "--format" in proc.stderr
        )
    assert not db.exists() or sleuth("runs", "--json", "--db", str(db)).stdout.strip() == "[]"


def test_show_fences_a_timeline_that_quotes_fences_of_its_own(tmp_path):
    """mini-swe-agent's session quotes ``` blocks: the timeline's fence is longer than any of them,
    so the Markdown of `sleuth show` keeps the whole timeline in one code block."""
    db = tmp_path / "runs.db"
    path = FIXTURES / "mini-swe-agent" / "calc_fix.traj.json"
    run = json.loads(sleuth("import", str(path), "--db", str(db), "--json").stdout)["run_id"]
    text = sleuth("show", run, "--db", str(db), "--markdown").stdout
    timeline = text.split("## Timeline\n\n", 1)[1].rstrip("\n").splitlines()
    fence = timeline[0]
    assert set(fence) == {"`"} and timeline[-1] == fence
    inner = timeline[1:-1]
    assert any("```" in line for line in inner)  # the session's own fences are inside
    assert not any(line.strip().startswith(fence) for line in inner)


def test_a_session_whose_format_counts_no_tokens_says_so_not_zero(tmp_path):
    """A mini-swe-agent trajectory without usage imported as "tokens in 0 / out 0", a count it
    never made; one with usage says its numbers."""
    db = tmp_path / "r.db"
    without = sleuth("import", str(FIXTURES / "mini-swe-agent" / "calc_fix.traj.json"), "--db", str(db))
    assert without.returncode == 0 and without.stdout.rstrip().endswith("no token counts in this format")
    assert "tokens in" not in without.stdout
    counted = sleuth("import", str(FIXTURES / "mini-swe-agent" / "count_files.traj.json"), "--db", str(db))
    assert counted.stdout.rstrip().endswith("tokens in 1,682 / out 35"), counted.stdout


def test_show_gives_each_call_and_its_result_one_line_and_marks_an_error_result(tmp_path):
    """A trial's `sleuth show` of an opencode session printed 1,236 lines (whole files after "->"),
    and Claude Code's denied Write read as an ordinary result; an imported run printed empty
    Hypotheses and Measurements headings."""
    db = tmp_path / "runs.db"
    shown = {}
    for path in (
        FIXTURES / "opencode" / "session__neon-river__ses_39b623ce7ffeILPe9UgDcyGicH.json",
        FIXTURES / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    ):
        run = json.loads(sleuth("import", str(path), "--db", str(db), "--json").stdout)["run_id"]
        events = json.loads(sleuth("show", run, "--db", str(db), "--json").stdout)["events"]
        text = sleuth("show", run, "--db", str(db), "--markdown").stdout
        timeline = text.split("## Timeline\n\n", 1)[1].rstrip("\n").splitlines()[1:-1]
        assert len(timeline) <= len(events) and all(len(line) < 400 for line in timeline), max(map(len, timeline))
        assert "## Hypotheses" not in text and "## Measurements" not in text and "status imported\n" in text
        shown[path.parent.name] = timeline
    assert any("(+" in line and " lines)" in line for line in shown["opencode"])  # a file read: its first line
    denied = [line for line in shown["claude-code"] if "ERROR: " in line]
    assert len(denied) == 1 and "Write" in denied[0], denied
    # Claude Code times its lines only: a call's time is its result's line's less its own
    assert all(line.rstrip().endswith("s)") for line in shown["claude-code"] if " -> " in line)


def test_a_truncated_copy_of_a_session_is_not_a_second_run_and_a_grown_one_updates_its_run(tmp_path):
    """A trial imported a truncated copy of a Claude Code session: a second run with the same
    session id (three runs of one session, with a bad-line copy). A copy that holds the start of
    an imported session changes nothing; the session grown since its import updates its run."""
    full = FIXTURES / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    lines = full.read_text().splitlines(keepends=True)
    part = tmp_path / "part.jsonl"
    part.write_text("".join(lines[: len(lines) // 2]))

    db = tmp_path / "a.db"
    whole = json.loads(sleuth("import", str(full), "--db", str(db), "--json").stdout)
    said = sleuth("import", str(part), "--db", str(db))
    assert said.returncode == 0 and said.stdout.startswith(f"already imported as {whole['run_id']}, which holds ")
    assert json.loads(sleuth("import", str(part), "--db", str(db), "--json").stdout)["action"] == "holds more"
    assert [r["id"] for r in json.loads(sleuth("runs", "--json", "--db", str(db)).stdout)] == [whole["run_id"]]

    db = tmp_path / "b.db"  # the other order: imported while it was shorter, then grown
    first = json.loads(sleuth("import", str(part), "--db", str(db), "--json").stdout)
    grown = json.loads(sleuth("import", str(full), "--db", str(db), "--json").stdout)
    assert grown["action"] == "updated" and grown["run_id"] == first["run_id"] and not grown["new"]
    runs = json.loads(sleuth("runs", "--json", "--db", str(db)).stdout)
    assert [r["id"] for r in runs] == [first["run_id"]]
    events = json.loads(sleuth("show", first["run_id"], "--db", str(db), "--json").stdout)["events"]
    assert len(events) == whole["events"] and [e["seq"] for e in events] == list(range(1, len(events) + 1))
    again = json.loads(sleuth("import", str(full), "--db", str(db), "--json").stdout)
    assert again["action"] == "already" and again["run_id"] == first["run_id"]


def test_a_swe_agent_trajectory_keeps_its_last_action_and_each_actions_time(tmp_path):
    """`history` ends before the final `submit` that `trajectory`, `info.exit_status` and
    `model_stats.api_calls` (5) record: a trial's import had 4 tool calls, no durations, and the
    run dated at import time (an old trajectory listed as the newest run)."""
    import os

    path = FIXTURES / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.gpt4.traj"
    raw = json.loads(path.read_text())
    copy = tmp_path / path.name
    copy.write_text(path.read_text())
    os.utime(copy, (1_700_000_000, 1_700_000_000))
    db = tmp_path / "r.db"
    res = json.loads(sleuth("import", str(copy), "--db", str(db), "--json").stdout)
    assert res["tool_calls"] == len(raw["trajectory"]) == raw["info"]["model_stats"]["api_calls"] == 5
    evs = events(db, res["run_id"])
    calls = [e for e in evs if e["kind"] == "tool_call"]
    assert calls[-1]["text"] == "submit" and raw["info"]["exit_status"] == "submitted"
    took = [e["duration_s"] for e in evs if e["kind"] == "tool_result"]
    assert took == [float(t["execution_time"]) for t in raw["trajectory"]]
    run = json.loads(sleuth("show", res["run_id"], "--db", str(db), "--json").stdout)["run"]
    assert run["started"] == 1_700_000_000  # its file's time: the trajectory keeps none


def test_an_agents_reasoning_is_kept_apart_searchable_and_never_exported_as_what_it_said(tmp_path):
    """A trial: opencode's six reasoning parts were dropped (`sleuth search 'Planning new scraping'`:
    no match, so no score could find a cause named only there), an aborted response came in as an
    empty reply, and the tools' run times were left out."""
    path = FIXTURES / "opencode" / "session__neon-river__ses_39b623ce7ffeILPe9UgDcyGicH.json"
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(path), "--db", str(db), "--json").stdout)["run_id"]
    evs = events(db, run)
    thinking = [e["text"] for e in evs if e["kind"] == "reasoning"]
    assert len(thinking) == 6 and thinking[0] == "**Planning new scraping skill**"
    assert run in sleuth("search", "Planning new scraping", "--db", str(db)).stdout
    aborted = [e for e in evs if e["kind"] == "assistant" and json.loads(e["payload"])["is_error"]]
    assert [e["text"] for e in aborted] == ["[MessageAbortedError] The operation was aborted."]
    assert all(e["duration_s"] is not None for e in evs if e["kind"] == "tool_result")
    # The export keeps it as ATIF's reasoning, and out of the messages the agent sent.
    atif = json.loads(sleuth("export", run, "--format", "atif", "--db", str(db)).stdout)
    assert sum("reasoning_content" in s for s in atif["steps"]) >= 1
    assert "Planning new scraping skill" in json.dumps([s.get("reasoning_content") for s in atif["steps"]])
    messages = sleuth("export", run, "--format", "openai-messages", "--db", str(db)).stdout
    assert "Planning new scraping" not in messages
