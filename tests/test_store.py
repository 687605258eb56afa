"""The transcript store: every step committed as it happens, secrets never written, searchable."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest

from transcripts.store import Store, redact


@pytest.mark.parametrize(
    ("raw", "must_not_contain"),
    [
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234 sleuth hunt", "sk-proj-abcdefghijklmnop1234"),
        ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig'", "eyJhbGciOiJIUzI1NiJ9"),
        ("git clone https://deploy:hunter2@github.example/x.git", "hunter2"),
        ("export HF_TOKEN=hf_abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstu"),
        ("mysql --password=s3cr3t-pw --user root", "s3cr3t-pw"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123 leaked", "ghp_abcdefghijklmnopqrstuvwxyz0123"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAA",
        ),
        ("AWS key AKIAIOSFODNN7EXAMPLE in env", "AKIAIOSFODNN7EXAMPLE"),
    ],
)
def test_secrets_are_redacted(raw, must_not_contain):
    assert must_not_contain not in redact(raw)
    assert "REDACTED" in redact(raw)


@pytest.mark.parametrize(
    "harmless",
    ["max_tokens = 24", "--max-new-tokens 128", "tokenizer_path=/models/kimi", "num_tokens: 2048"],
)
def test_words_that_only_contain_token_are_not_secrets(harmless):
    assert redact(harmless) == harmless
    assert redact({"max_tokens": "24", "tokenizer": "kimi"}) == {"max_tokens": "24", "tokenizer": "kimi"}


def test_redaction_walks_payloads_and_keeps_harmless_text():
    payload = {
        "env": {"OPENAI_API_KEY": "abc123", "NCCL_PROTO": "LL"},
        "argv": ["--api-key", "x"],
        "note": "NCCL_PROTO=LL refuted",
    }
    out = redact(payload)
    assert out["env"] == {"OPENAI_API_KEY": "[REDACTED]", "NCCL_PROTO": "LL"}
    assert out["note"] == "NCCL_PROTO=LL refuted"


def test_every_event_is_committed_as_it_happens(tmp_path):
    store = Store(tmp_path / "runs.db")
    store.start_run("r1", policy="methodical", target="/repo")
    seqs = [store.event("r1", "note", f"step {i}") for i in range(3)]
    assert seqs == [1, 2, 3]
    # Another connection (another process after a SIGKILL) sees them without any close or commit.
    other = sqlite3.connect(tmp_path / "runs.db")
    assert other.execute("select count(*) from events where run = 'r1'").fetchone()[0] == 3
    store.event("r1", "tool_call", "git_log", {"args": {"token": "t0ps3cret"}}, duration_s=0.25)
    row = other.execute("select payload, duration_s from events where seq = 4").fetchone()
    assert "t0ps3cret" not in row[0] and row[1] == 0.25
    with pytest.raises(ValueError, match="unknown event kind"):
        store.event("r1", "gossip", "x")


def test_measurements_hypotheses_search_and_runs(tmp_path):
    store = Store(tmp_path / "runs.db")
    store.start_run("r1", target="/repo")
    store.put_measurement(
        "r1",
        {
            "id": "m1",
            "label": "now",
            "ref": "a" * 40,
            "samples": [1.0, 2.0, 3.0],
            "median": 2.0,
            "ci_low": 1.0,
            "ci_high": 3.0,
        },
        "tok_per_s",
    )
    store.put_hypotheses(
        "r1",
        [
            {
                "id": "h1",
                "category": "environment",
                "statement": "NCCL_PROTO slows it",
                "test": "A/B",
                "status": "refuted",
                "reason": "same",
                "evidence": ["m1"],
            }
        ],
    )
    store.event("r1", "verdict", "h1 refuted: NCCL_PROTO makes no difference")
    store.update_run("r1", status="concluded", probes=3, verdict=json.dumps({"status": "concluded"}))
    assert json.loads(store.measurements("r1")[0]["samples"]) == [1.0, 2.0, 3.0]
    assert store.hypotheses("r1")[0]["status"] == "refuted"
    assert [h["seq"] for h in store.search("NCCL_PROTO")] == [1]
    assert store.runs()[0]["status"] == "concluded" and store.run("nope") is None
    tables = set(
        sqlite3.connect(tmp_path / "runs.db").execute("select name from sqlite_master where type = 'table'").fetchall()
    )
    assert {("runs",), ("events",), ("measurements",), ("hypotheses",), ("events_fts",)} <= tables


def test_a_store_made_before_hypothesis_subjects_gains_the_column_and_keeps_its_rows(tmp_path):
    db = tmp_path / "runs.db"
    Store(db)
    con = sqlite3.connect(db)
    con.execute("alter table hypotheses drop column subject")  # as stores were before it
    con.execute("insert into hypotheses (run, hid, category, statement, test, status, reason, evidence) "
                "values ('r0', 'h1', 'history', 's', 't', 'refuted', 'why', '[]')")  # fmt: skip
    con.commit()
    con.close()
    store = Store(db)
    h = {"id": "h1", "category": "dependencies", "statement": "torch slows it", "test": "A/B", "status": "open",
         "reason": "", "evidence": [], "subject": "torch"}  # fmt: skip
    store.put_hypotheses("r1", [h])
    assert store.hypotheses("r0")[0]["subject"] is None and store.hypotheses("r1")[0]["subject"] == "torch"


def test_a_new_store_opened_while_another_process_makes_its_tables_waits_for_it(tmp_path):
    """A hunt creating its store and a `sleuth runs` polling it both make the tables; the one that
    finds the write lock held past its busy timeout (a starved process) tries again, not fails."""
    path = tmp_path / "r.db"
    holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    holder.execute("pragma journal_mode = wal")
    holder.execute("create table runs (id text primary key)")  # half a schema, as a maker mid-way
    holder.execute("begin immediate")
    release = threading.Timer(0.6, lambda: holder.execute("commit"))
    release.start()
    try:
        store = Store(path, busy_timeout_s=0.2)  # the lock outlasts three of its waits
    finally:
        release.join()
        holder.close()
    assert {"runs", "events", "measurements", "hypotheses"} <= set(store.db.table_names())
    store.close()


def test_a_write_waits_for_another_processs_write_and_then_succeeds(tmp_path):
    """Two hunts on one store: a write that read first (the next event's number) and found the
    other process's write committed in the meantime failed at once with "database is locked"
    (SQLite does not wait for a deferred transaction's upgrade). Each write now takes the lock at
    its start and waits for it."""
    path = tmp_path / "r.db"
    ours = Store(path)
    ours.start_run("r2")
    holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    holder.execute("begin immediate")  # the other hunt, mid-write
    holder.execute("insert into runs (id, kind, started, status) values ('r1', 'hunt', 0, 'running')")
    release = threading.Timer(0.5, lambda: holder.execute("commit"))
    release.start()
    try:
        seq = ours.event("r2", "note", "written once the other hunt committed")
    finally:
        release.join()
        holder.close()
    assert seq == 1 and [r["id"] for r in ours.runs()] == ["r2", "r1"]
    assert [e["text"] for e in ours.events("r2")] == ["written once the other hunt committed"]
    ours.close()


def test_a_store_locked_for_good_still_says_so(tmp_path):
    path = tmp_path / "r.db"
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("create table runs (id text primary key)")
    holder.execute("begin exclusive")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            Store(path, busy_timeout_s=0.05)
    finally:
        holder.close()


@pytest.mark.parametrize(
    "dump",
    [
        '{"HF_TOKEN": "hf_FAKEabcdefghijkl", "DB_PASSWORD": "hunter2fake", "max_tokens": "24"}',  # json.dumps(env)
        # that dump inside a JSON string
        '{\\"HF_TOKEN\\": \\"hf_FAKEabcdefghijkl\\", \\"DB_PASSWORD\\": \\"hunter2fake\\"}',
        "{'HF_TOKEN': 'hf_FAKEabcdefghijkl', 'DB_PASSWORD': 'hunter2fake'}",  # a Python repr
    ],
)
def test_an_environment_dump_is_redacted_in_each_quoting(dump):
    out = redact(dump)
    assert "hf_FAKE" not in out and "hunter2fake" not in out and out.count("[REDACTED]") == 2
    assert "max_tokens" not in dump or '"max_tokens": "24"' in out  # a count is not a secret


def test_secrets_in_the_hunts_environment_reach_neither_the_store_nor_an_export(tiny, tmp_path, monkeypatch):
    """The environment hypothesis dumps the server's environment as JSON: a user's HF_TOKEN,
    DB_PASSWORD and OPENAI_API_KEY were stored and exported as they were (a new user's trial)."""
    from tests.conftest import sleuth_in_process

    secrets = {"HF_TOKEN": "hf_FAKEabcdefghijkl", "DB_PASSWORD": "hunter2fake", "OPENAI_API_KEY": "fakekey123456789"}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    repo, good = tiny
    db = tmp_path / "r.db"
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better", "--db", db, "--json"
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    run_id = json.loads(proc.stdout)["run_id"]
    exported = sleuth_in_process("export", run_id, "--db", db).stdout
    assert "HF_TOKEN" in db.read_bytes().decode("utf-8", "replace")  # the dump is there, its values are not
    for value in secrets.values():
        assert value not in db.read_bytes().decode("utf-8", "replace") and value not in exported


@pytest.mark.parametrize(
    ("query", "finds"),
    [
        ("CLAUDE.md", True),  # FTS5 reads '.' as syntax
        ("gpu-node-1", True),  # ...and '-' as a column filter
        ('say "hi', False),  # an unterminated quote
        ("NCCL AND proto", True),  # the syntax still works where it parses
        ("103877ea", True),  # a short SHA against the 10 digits the events print: a prefix
        ("103877e", True),
        ("103877ea*", True),  # already a prefix query
        ("103877eb", False),
    ],
)
def test_search_takes_what_a_user_types(tmp_path, query, finds):
    from tests.conftest import sleuth_in_process

    store = Store(tmp_path / "runs.db")
    store.start_run("r1", target="/repo")
    store.event("r1", "note", "read CLAUDE.md on gpu-node-1; NCCL_PROTO refuted (NCCL proto); culprit 103877ea3e")
    store.close()
    proc = sleuth_in_process("search", query, "--db", tmp_path / "runs.db", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert bool(json.loads(proc.stdout)) == finds
