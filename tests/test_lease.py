"""One driver per run: a run is advanced by at most one live process, and the lease dies with it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git_in, one_slow_commit, sleuth_exe, sleuth_in_process
from transcripts.lease import RunBusy, RunLease, is_driven, read_holder

HOLD = """
import sys, time
from pathlib import Path
from transcripts.lease import RunLease
RunLease(Path(sys.argv[1]), "r1").acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holder(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_lease_held_by_a_live_process_is_refused_and_freed_by_its_death_even_by_sigkill(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    proc = _holder(run_dir)
    try:
        assert is_driven(run_dir)
        with pytest.raises(RunBusy, match=rf"driven by another process \(pid {proc.pid} on "):
            RunLease(run_dir, "r1").acquire()
        assert read_holder(run_dir)["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert not is_driven(run_dir)  # the kernel dropped the lock with its holder: no stale lease
    with RunLease(run_dir, "r1") as lease:
        assert is_driven(run_dir) and read_holder(run_dir)["pid"] != proc.pid
        with lease:  # re-entrant within the process that holds it
            pass
        assert is_driven(run_dir)
    assert not is_driven(run_dir)


SLOW_BENCH = "import random, time, lib; time.sleep(0.3); print(lib.COST * random.gauss(1, 0.005))\n"


@pytest.fixture
def project(tmp_path) -> tuple[Path, str, str]:
    """A benchmark-command project whose every sample sleeps 0.3 s (a hunt lasts tens of seconds,
    asleep, not on the CPU): (repo, good, the commit that doubled the cost)."""
    return one_slow_commit(tmp_path / "project", commits=5, slow=3, bench=SLOW_BENCH)


def _hunt_args(project: tuple[Path, str, str], db: Path) -> list[str]:
    repo, good, _ = project
    return ["hunt", "--repo", str(repo), "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
            "--db", str(db), "--json"]  # fmt: skip


def _run_row(db: Path, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = sleuth_in_process("runs", "--db", str(db), "--json")
        if proc.returncode == 0 and json.loads(proc.stdout):
            return json.loads(proc.stdout)[0]
        time.sleep(0.2)
    raise AssertionError("the hunt never wrote its run row")


def test_a_second_driver_of_a_running_hunt_is_told_who_drives_it_and_changes_nothing(project, tmp_path):
    db = tmp_path / "r.db"
    hunt = subprocess.Popen(
        [sleuth_exe(), *_hunt_args(project, db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run = _run_row(db)
        if hunt.poll() is not None:
            pytest.fail("the hunt ended before a second driver could try: " + hunt.stderr.read()[-500:])  # type: ignore[union-attr]
        events_before = json.loads(sleuth_in_process("show", run["id"], "--db", str(db), "--json").stdout)
        second = sleuth_in_process("resume", run["id"], "--db", str(db), "--json")
        assert second.returncode == 2
        assert f"RUN: run '{run['id']}' is driven by another process (pid {hunt.pid} on" in second.stderr
        third = sleuth_in_process("approve", run["id"], "--db", str(db))
        assert third.returncode == 2 and f"(pid {hunt.pid} on" in third.stderr
        out, err = hunt.communicate(timeout=300)
    finally:
        if hunt.poll() is None:
            hunt.kill()
    assert hunt.returncode == 0, err[-2000:]
    verdict = json.loads(out)
    assert verdict["status"] == "awaiting_approval"
    assert verdict["root_cause"]["ref"] == project[2]
    # nothing the refused drivers did is in the transcript: one "resumed" note would betray them
    events = json.loads(sleuth_in_process("show", run["id"], "--db", str(db), "--json").stdout)
    assert len(events_before["events"]) <= len(events["events"])
    assert not any("resumed from the last checkpoint" in e["text"] for e in events["events"])


def test_two_approvals_at_once_land_one_revert(project, tmp_path):
    db = tmp_path / "r.db"
    proc = sleuth_in_process(*_hunt_args(project, db))
    assert proc.returncode == 0, proc.stdout[-2000:]
    run = json.loads(proc.stdout)["run_id"]
    both = [
        subprocess.Popen(
            [sleuth_exe(), "approve", run, "--db", str(db), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in both]  # type: ignore[union-attr]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for rc, _, err in results if rc == 2)
    # the loser either found the winner driving, or came after it and found nothing to approve
    assert "is driven by another process" in refused or "is not awaiting approval" in refused
    branches = git_in(project[0])("branch", "--list", "sleuth/*").split()
    assert len([b for b in branches if b.startswith("sleuth/")]) == 1
    shown = json.loads(sleuth_in_process("show", run, "--db", str(db), "--json").stdout)
    assert sum(1 for e in shown["events"] if "revert landed on branch" in e["text"]) == 1
