"""Kill -9 anywhere: a hunt and its approval driven through SIGKILLs, and what must still hold.

A lab scenario is hunted by real ``sleuth`` processes; at chosen points each is killed with SIGKILL,
and what a person would then run is run: ``sleuth resume RUN`` after a killed hunt, ``sleuth approve
RUN`` again after a killed approval (which finishes the run if the approval was recorded). A kill
point is the process to kill and how many events into that process's work to kill it (``at``), so a
seeded random draw of points covers every phase: the launch, a bisection probe, the confirmation,
the proposal, landing the revert. The checks (``violations``):

- the run ends awaiting approval with the culprit of the scenario's truth, then lands the revert;
- nothing measured is measured again: after each resume, every answer the dead driver had
  recorded since its last checkpoint was served back (the "caught up" note) and no recorded
  measurement call of the run lacks its result except the one in flight at a kill;
- no duplicated phase: one confirmation, one proposal, one "revert landed";
- at most one revert branch; no server process and no scratch worktree left; the user's
  repository byte-identical apart from that branch.

``bench/kill9.py`` runs many points and prints the counts; the tests run a few.
"""

from __future__ import annotations

import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from evals.fingerprint import added_refs, fingerprint, leftovers

MEASURING = ("measure", "measure_pair", "measure_arms", "probe")


@dataclass
class KillPoint:
    process: Literal["hunt", "approve"]
    at: int  # events written by this process before it is killed


@dataclass
class Outcome:
    run: str
    verdict: dict
    kills: list[str] = field(default_factory=list)  # "hunt@12 (probe)" for each kill that happened
    commands: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def sleuth() -> str:
    beside = Path(sys.executable).parent / "sleuth"
    return str(beside) if beside.exists() else "sleuth"


def _query(db: Path, sql: str) -> list[dict]:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(sql)]
    except sqlite3.Error:  # not created yet, or busy past the timeout: nothing to read this time
        return []


def _events(db: Path) -> list[dict]:
    return _query(db, "select run, seq, kind, text, payload from events order by id")


def _count(db: Path) -> int:
    """Events written so far (what the kill points count; polled, so no rows are read)."""
    rows = _query(db, "select count(*) as n from events")
    return rows[0]["n"] if rows else 0


def _phase(e: dict | None) -> str:
    if e is None:
        return "-"
    payload = json.loads(e["payload"] or "null") or {}
    return str(payload.get("phase") or payload.get("name") or e["kind"]) if isinstance(payload, dict) else e["kind"]


def _drive(cmd: list[str], db: Path, kill_at: int | None, timeout: float) -> tuple[int | None, str, str, str]:
    """Run one sleuth command; with ``kill_at``, SIGKILL it once it has written that many events.
    Returns (exit code or None if killed, stdout, stderr, the phase it was killed in)."""
    before = _count(db)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while kill_at is not None and proc.poll() is None and time.monotonic() < deadline:
            if _count(db) - before >= kill_at:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
                last = _query(db, "select kind, payload from events order by id desc limit 1")
                return None, "", "", _phase(last[0] if last else None)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, ""


def run_with_kills(alert: Path, db: Path, kills: list[KillPoint], timeout: float = 600) -> Outcome:
    """Hunt ``alert`` to its proposal and approve it, killing each process at its points."""
    exe = sleuth()
    hunt_kills = [k.at for k in kills if k.process == "hunt"]
    approve_kills = [k.at for k in kills if k.process == "approve"]
    out = Outcome(run="", verdict={})
    cmd = [exe, "hunt", "--alert", str(alert), "--db", str(db), "--json"]
    while True:  # the hunt: killed at each of its points, resumed after each kill
        rc, stdout, stderr, phase = _drive(cmd, db, hunt_kills.pop(0) if hunt_kills else None, timeout)
        out.commands.append(" ".join(cmd[1:2] + cmd[2:3]))
        ev = _events(db)
        out.run = out.run or (ev[0]["run"] if ev else "")
        if rc is None:
            out.kills.append(f"hunt@{phase}")
            cmd = [exe, "resume", out.run, "--db", str(db), "--json"]
            continue
        if rc != 0:
            out.violations.append(f"{cmd[1]} exited {rc}: {stderr.strip().splitlines()[-1:]}")
            return out
        out.verdict = json.loads(stdout)
        break
    cmd = [exe, "approve", out.run, "--db", str(db), "--json"]
    while True:  # the approval: killed at its points, then approved again (which finishes a recorded one)
        rc, stdout, stderr, phase = _drive(cmd, db, approve_kills.pop(0) if approve_kills else None, timeout)
        out.commands.append(cmd[1])
        if rc is None:
            out.kills.append(f"{cmd[1]}@{phase}")
            continue
        if rc != 0:
            out.violations.append(f"{cmd[1]} exited {rc}: {stderr.strip().splitlines()[-1:]}")
            return out
        out.verdict = json.loads(stdout)
        return out


def violations(out: Outcome, db: Path, truth: dict, repo: Path, root: Path, before: dict[str, str]) -> list[str]:
    """What went wrong (empty: everything the module docstring promises held)."""
    bad = list(out.violations)
    v = out.verdict
    want = truth["root_causes"][0]["ref"]
    if (v.get("root_cause") or {}).get("ref") != want:
        bad.append(f"culprit {(v.get('root_cause') or {}).get('ref')} instead of {want}")
    action = v.get("proposed_action") or {}
    if action.get("status") != "applied":
        bad.append(f"the revert was not landed: action {action.get('status')}")
    ev = [e for e in _events(db) if e["run"] == out.run]
    texts = [e["text"] for e in ev]
    kills = len(out.kills)
    resumes = [e for e in ev if e["kind"] == "note" and e["text"] == "resumed from the last checkpoint"]
    caught = [json.loads(e["payload"]) for e in ev if e["text"].startswith("caught up after the resume")]
    for c in caught:
        if c["served"] != c["recorded"]:
            bad.append(f"a resume served {c['served']} of {c['recorded']} recorded answers: the rest were asked again")
    if len(caught) > len(resumes):
        bad.append("more catch-ups than resumes")
    open_calls, pending = 0, None
    for e in ev:
        payload = json.loads(e["payload"] or "null")
        if e["kind"] == "tool_call" and isinstance(payload, dict) and payload.get("name") in MEASURING:
            open_calls += pending is not None
            pending = e
        elif e["kind"] == "tool_result" and pending is not None:
            pending = None
    open_calls += pending is not None
    if open_calls > kills:
        bad.append(f"{open_calls} measurement calls without a result, {kills} kills")
    for label, needle in (
        ("confirmation", "confirmed:"),
        ("proposal", "proposed:"),
        ("landing", "revert landed on branch"),
    ):
        n = sum(1 for t in texts if needle in t)
        if n != 1:
            bad.append(f"{n} {label} events (want 1)")
    branches = _git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/sleuth/").split()
    if len(branches) != 1:
        bad.append(f"{len(branches)} revert branches: {branches}")
    if added_refs(before, fingerprint(repo)) != [f"refs/heads/{b}" for b in branches]:
        bad.append("the user's repository changed beyond the approved branch")
    servers, trees = leftovers(root, repo)
    if servers:
        bad.append("a server process is left")
    if trees:
        bad.append("a scratch worktree is left")
    return bad


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout


def draw(rng, hunt_events: int, approve_events: int, kills: int = 3) -> list[KillPoint]:
    """A random set of kill points: ``kills - 1`` in the hunt, at distinct places spread over the
    ``hunt_events`` an undisturbed hunt writes (each resumed process writes only what is new, plus
    its "resumed" and "caught up" notes, so a point is counted from where the last one fell), and
    one in the approval (within its ``approve_events``)."""
    spots = sorted(int(x) for x in rng.choice(np.arange(1, hunt_events), size=kills - 1, replace=False))
    points = [KillPoint("hunt", spots[0])]
    points += [KillPoint("hunt", b - a + 2) for a, b in itertools.pairwise(spots)]
    return [*points, KillPoint("approve", int(rng.integers(1, max(2, approve_events))))]
