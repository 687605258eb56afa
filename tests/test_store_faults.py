"""The store under faults: a database locked by another process or a full disk stops the run at
its last checkpoint with the reason, leaves nothing running, and ``sleuth resume`` finishes it
once the store is writable, with the verdict an undisturbed run gives."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from evals.fingerprint import leftovers
from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC, sleuth_exe, sleuth_in_process
from transcripts.store import Store, StoreUnavailable, unavailable


@pytest.fixture
def tiny(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(MINIMAL_SPEC)
    return build(load_spec(spec), tmp_path / "scenario")


def _hunt(alert: Path, db: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sleuth_exe(), "hunt", "--alert", str(alert), "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events_at_least(db: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> str:
    """The run's id once it has ``n`` events (the hunt is under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(db, timeout=1) as conn:
                row = conn.execute("select run, count(*) from events group by run").fetchone()
        except sqlite3.Error:
            row = None
        if row and row[1] >= n:
            return row[0]
        time.sleep(0.05)
    raise AssertionError("the hunt ended or stalled before it was under way")


def _resume_to_the_end(run: str, db: Path) -> dict:
    done = sleuth_in_process("resume", run, "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_write_that_fails_is_store_unavailable_and_other_errors_are_not(tmp_path):
    store = Store(tmp_path / "s.db")
    store.start_run("r1")
    holder = sqlite3.connect(tmp_path / "s.db")
    holder.execute("begin exclusive")  # another process holds the write lock
    try:
        quick = Store(tmp_path / "s.db", busy_timeout_s=0.2)
        with pytest.raises(StoreUnavailable, match=r"cannot write .*s\.db: database is locked"):
            quick.event("r1", "note", "in flight")
    finally:
        holder.rollback()
        holder.close()
    assert [e["text"] for e in store.events("r1")] == []  # the event in flight is what is lost
    store.event("r1", "note", "later")  # writable again: nothing else to do
    assert [e["text"] for e in store.events("r1")] == ["later"]
    with pytest.raises(ValueError):  # a bug is not the store being unavailable
        store.event("r1", "no-such-kind", "x")
    full = OSError(28, "No space left on device", str(tmp_path / "report.md"))
    assert unavailable(full, "s.db").path.endswith("report.md")  # type: ignore[union-attr]
    assert unavailable(OSError(2, "No such file"), "s.db") is None
    full_db = unavailable(sqlite3.OperationalError("database or disk is full"), "s.db")
    assert full_db is not None and full_db.reason == "database or disk is full"  # SQLite's SQLITE_FULL
    assert unavailable(sqlite3.OperationalError("no such table: x"), "s.db") is None


@pytest.mark.slow  # run by .ci/run with the other store faults; the default run keeps the kill -9 resumes
def test_a_database_locked_mid_hunt_stops_the_run_resumably_and_resume_finishes_it(tiny, tmp_path):
    db = tmp_path / "r.db"
    hunt = _hunt(tiny.root / "alert.json", db)
    holder = None
    try:
        run = _events_at_least(db, 12, hunt)
        holder = sqlite3.connect(db, timeout=30)
        holder.execute("begin exclusive")  # another process holds the write lock past the busy timeout
        out, err = hunt.communicate(timeout=240)
    finally:
        if hunt.poll() is None:
            hunt.kill()
        if holder is not None:
            holder.rollback()
            holder.close()
    assert hunt.returncode == 1, err[-2000:]
    assert "STORE: cannot write" in err and "database is locked" in err
    assert f"`sleuth resume {run} --db {db}` once the store is writable" in err and "Traceback" not in err
    assert out == ""
    stopped = (db.parent / "r.runs" / run / "store-error.txt").read_text()
    assert "database is locked" in stopped
    assert leftovers(tiny.root, tiny.repo) == ([], [])  # no server, no scratch worktree
    verdict = _resume_to_the_end(run, db)
    assert verdict["status"] == "awaiting_approval"
    assert verdict["root_cause"]["ref"] == tiny.truth["root_causes"][0]["ref"]
    row = Store(db).run(run)
    assert row["status"] == "awaiting_approval" and not row.get("error")
    assert leftovers(tiny.root, tiny.repo) == ([], [])


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]).returncode == 0


@pytest.mark.slow  # run by .ci/run on its own (root mounts the tmpfs)
def test_a_full_disk_mid_hunt_stops_the_run_resumably_and_resume_finishes_it_once_there_is_room(tiny, tmp_path):
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "64m"):
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    try:
        db = disk / "r.db"
        hunt = _hunt(tiny.root / "alert.json", db)
        try:
            run = _events_at_least(db, 12, hunt)
            filler = disk / "filler"
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=100"], capture_output=True)
            out, err = hunt.communicate(timeout=240)
        finally:
            if hunt.poll() is None:
                hunt.kill()
        assert hunt.returncode == 1, err[-2000:]
        assert "STORE: cannot write" in err and ("full" in err or "No space left" in err), err[-1000:]
        assert f"`sleuth resume {run} --db {db}`" in err and "Traceback" not in err and out == ""
        assert leftovers(tiny.root, tiny.repo) == ([], [])
        filler.unlink()  # room again
        verdict = _resume_to_the_end(run, db)
        assert verdict["status"] == "awaiting_approval"
        assert verdict["root_cause"]["ref"] == tiny.truth["root_causes"][0]["ref"]
        assert Store(db).run(run)["status"] == "awaiting_approval"
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_two_hunts_on_one_store_at_once_both_finish(tmp_path):
    """A new user's second hunt on a shared store died within seconds ("database is locked"),
    while the first went on: every write now waits for the other's."""
    from tests.conftest import one_slow_commit

    hunts, want = [], []
    for name in ("a", "b"):
        repo, good, slow = one_slow_commit(tmp_path / name, 16, 11)
        want.append(slow)
        cmd = [sleuth_exe(), "hunt", "--repo", str(repo), "--good", good, "--bench", "python3 bench.py"]
        cmd += ["--lower-is-better", "--db", str(tmp_path / "shared.db"), "--json"]
        hunts.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for proc in hunts:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-2000:]
            outs.append(json.loads(out))
    finally:
        for proc in hunts:
            if proc.poll() is None:
                proc.kill()
    assert [v["root_cause"]["ref"] for v in outs] == want
    assert {r["id"] for r in Store(tmp_path / "shared.db").runs()} == {v["run_id"] for v in outs}
