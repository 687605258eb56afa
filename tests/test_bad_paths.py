"""Bad stores, output paths and searches are bad input: one line naming the flag and the file,
exit 2, the file left as it was, and no work done first (trial 11: an evaluation team's tries,
each of which ended in a traceback, or in a result printed nowhere)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import sleuth_in_process as sleuth
from tests.worlds import load

REAL = Path(__file__).resolve().parents[1] / "evals" / "suites" / "real"


def one_line_error(proc, *parts: str) -> str:
    """The one line of a refused command (exit 2), which names each of ``parts``."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (proc.returncode, proc.stderr)
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def a_session(folder: Path) -> Path:
    """A two-message OpenAI messages session to import."""
    path = folder / "session.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    return path


@pytest.fixture
def store(tmp_path) -> tuple[Path, str]:
    """A real store holding one recorded hunt (the approved world), and its run id."""
    db = tmp_path / "runs.db"
    got = load("approved", db)
    return db, str(got["run"]["id"])


def test_a_file_that_is_no_database_is_named_and_left_as_it_was(tmp_path):
    notes = tmp_path / "notes.db"
    notes.write_text("my notes, not a store\n")
    session = a_session(tmp_path)
    for args in (["runs"], ["search", "gpu"], ["import", str(session)]):
        one_line_error(sleuth(*args, "--db", str(notes)), "--db", str(notes), "no SQLite database")
    assert notes.read_text() == "my notes, not a store\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db", "session.json"]


def test_a_truncated_store_is_said_in_one_line_not_a_traceback(store, tmp_path):
    db, _run = store
    cut = tmp_path / "cut.db"
    cut.write_bytes(db.read_bytes()[:20_000])  # a copy that stopped mid-way
    before = cut.read_bytes()
    for args in (["runs"], ["show", "x"], ["export", "x"]):
        one_line_error(sleuth(*args, "--db", str(cut)), str(cut), "not a readable run store", "malformed")
    assert cut.read_bytes() == before


def test_a_store_path_under_a_file_names_the_file(tmp_path):
    (tmp_path / "report.json").write_text("{}")
    db = tmp_path / "report.json" / "runs.db"
    one_line_error(sleuth("runs", "--db", str(db)), "--db", f"{tmp_path / 'report.json'} is a file, not a folder")
    session = a_session(tmp_path)
    one_line_error(sleuth("import", str(session), "--db", str(db)), "is a file, not a folder")


def test_a_store_on_a_read_only_file_system_is_refused_before_anything_is_written(store, tmp_path):
    """A store archived on a read-only mount: every command writes its store (the schema, the
    write-ahead log), and SQLite said "unable to open database file" as a traceback."""
    db, _run = store
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copy(db, archive / "runs.db")
    session = a_session(tmp_path)
    sleuth_exe = shutil.which("sleuth") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "sleuth")
    script = (
        f"mount --bind {archive} {archive} && mount -o remount,ro,bind {archive} && "
        f"{sleuth_exe} runs --db {archive / 'runs.db'}; echo rc=$?; "
        f"{sleuth_exe} import {session} --db {archive / 'new.db'}; echo rc=$?"
    )
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if "rc=" not in proc.stdout:
        pytest.skip(f"no mount namespace here: {proc.stderr.strip()[:200]}")
    assert proc.stdout.split() == ["rc=2", "rc=2"], proc.stdout + proc.stderr
    said = proc.stderr.strip().splitlines()
    assert len(said) == 2 and "not writable" in said[0] and "copy it somewhere writable" in said[0], said
    assert f"cannot create a store in {archive}" in said[1], said


def test_an_output_file_in_a_missing_folder_is_refused_before_the_work(store, tmp_path):
    db, run = store
    out = tmp_path / "nowhere" / "run.json"
    proc = sleuth("export", run, "--out", str(out), "--db", str(db))
    one_line_error(proc, "--out", str(out.parent), "no such folder")
    one_line_error(sleuth("export", run, "--out", str(tmp_path), "--db", str(db)), "--out", "is a folder")
    # An evaluation's report: refused before a hunt runs (it ran 37 s, then died, its results
    # printed nowhere).
    spec = next(REAL.glob("*/case.toml"))
    report = tmp_path / "evrep" / "eval.md"
    proc = sleuth("eval", str(spec), "--report", str(report), "--db", str(tmp_path / "e.db"), "--json")
    one_line_error(proc, "--report", str(report.parent), "no such folder")
    assert proc.stdout == "" and not (tmp_path / "e.db").exists()


def test_eval_flags_that_would_be_ignored_are_refused(store, tmp_path):
    db, _run = store
    proc = sleuth("eval", "--compare", "a", "b", "--report", str(tmp_path / "c.md"), "--db", str(db))
    one_line_error(proc, "--report", "not with --compare")
    one_line_error(sleuth("eval", "--rescore", "s", "--policy", "llm", "--db", str(db)), "--policy", "--rescore")
    one_line_error(sleuth("eval", "cases/none", "--compare", "a", "b", "--db", str(db)), "PATH", "--compare")
    one_line_error(sleuth("eval", "--rescore", "s", "--resume", "s", "--db", str(db)), "--rescore/--resume")
    assert not (tmp_path / "c.md").exists()


def test_a_suite_folder_with_a_case_missing_its_spec_is_refused_not_shrunk(tmp_path):
    """One case's case.toml gone from a suite: the set scored "100 % of 1 runs" without a word."""
    suite = tmp_path / "suite"
    kept, lost = sorted(REAL.iterdir())[:2]
    shutil.copytree(kept, suite / kept.name)
    shutil.copytree(lost, suite / lost.name)
    (suite / lost.name / "case.toml").unlink()
    proc = sleuth("eval", str(suite), "--db", str(tmp_path / "e.db"))
    one_line_error(proc, "PATH", str(suite / lost.name), "no case.toml")
    assert not (tmp_path / "e.db").exists()


def test_an_empty_search_is_bad_input_and_a_lone_quote_matches_nothing(store):
    db, _run = store
    one_line_error(sleuth("search", "", "--db", str(db)), "TEXT", "empty")
    proc = sleuth("search", '"', "--db", str(db))
    assert proc.returncode == 0 and proc.stdout.strip() == "no match", proc.stderr


def test_an_unknown_jsonl_and_an_empty_file_say_what_they_are_not(tmp_path):
    lines = tmp_path / "metrics.jsonl"
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    one_line_error(
        sleuth("import", str(lines), "--db", str(tmp_path / "r.db")), str(lines), "JSON lines, but not a Claude Code"
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    one_line_error(sleuth("import", str(empty), "--db", str(tmp_path / "r.db")), str(empty), "empty")
    folder = tmp_path / "nothing"
    folder.mkdir()  # it said "--session: ... holds 0 sessions; name one ()"
    proc = sleuth("import", str(folder), "--format", "opencode", "--db", str(tmp_path / "r.db"))
    one_line_error(proc, str(folder), "no opencode session in it")
    assert not (tmp_path / "r.db").exists()


def test_show_answers_each_parallel_call_with_its_own_result(tmp_path):
    """Two calls made at once, their results back in the other order: each call's line shows its
    own result (it showed whatever result came next, the other call's)."""
    session = [
        {"role": "user", "content": "look around"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": '{"path": "b.txt"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_b", "content": "contents of b"},
        {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
        {"role": "assistant", "content": "done"},
    ]
    path = tmp_path / "session.json"
    path.write_text(json.dumps(session))
    db = tmp_path / "r.db"
    res = json.loads(sleuth("import", str(path), "--db", str(db), "--json").stdout)
    text = sleuth("show", res["run_id"], "--db", str(db)).stdout
    calls = [line for line in text.splitlines() if "tool_call" in line]
    assert len(calls) == 2, text
    assert "a.txt" in calls[0] and calls[0].endswith("contents of a"), calls
    assert "b.txt" in calls[1] and calls[1].endswith("contents of b"), calls
    assert "tool_result" not in text  # both answered on their calls' lines


def test_a_strict_replay_past_the_end_of_its_recording_names_the_event_after_the_last(store):
    """A recording cut short: the replay goes on where it ends, and says at which event (it said
    "event None")."""
    db, run = store
    import sqlite3

    con = sqlite3.connect(db)
    last = con.execute("select max(seq) from events where run = ?", [run]).fetchone()[0]
    con.execute("delete from events where run = ? and seq > ?", [run, last - 30])
    con.commit()
    con.close()
    proc = sleuth("replay", run, "--db", str(db), "--json")
    got = json.loads(proc.stdout)
    assert proc.returncode == 1 and got["divergence"]["seq"] == last - 30 + 1, got["divergence"]
    assert got["divergence"]["expected"].startswith("the end of the recording")
