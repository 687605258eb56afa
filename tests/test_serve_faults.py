"""`sleuth serve` killed with SIGKILL mid-hunt, then started again: one driver per run.

By default the hunt dies with the service (its servers and worktrees cleaned up) and the next
service resumes the run; with ``leave_hunts_running`` the hunt goes on, and the next service adopts
it (watches, never starts a second driver) until it ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import sleuth_exe, wait_for
from tests.test_agent import servers_in_worktrees, worktrees
from tests.test_eval import LOUD
from tests.test_serve import AUTH, CONFIG, FIRING, TOKEN, free_port
from transcripts.store import Store


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text(errors="replace") if Path(f"/proc/{pid}/stat").exists() else ""
    return ") Z " not in stat  # a zombie is dead


class Serve:
    def __init__(self, tmp: Path, db: Path) -> None:
        self.tmp, self.db = tmp, db
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp / f"serve-{self.port}.log", "w")  # noqa: SIM115
        where = ["--bind", f"127.0.0.1:{self.port}", "--config", str(tmp / "targets.toml"), "--db", str(db)]
        self.proc = subprocess.Popen(
            [sleuth_exe(), "serve", *where],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

        def up() -> bool:
            try:
                return httpx.get(f"{self.url}/health").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, 60, "the service to answer")

    def jobs(self) -> list[dict]:
        s = Store(self.db)
        try:
            if "serve_jobs" not in s.db.table_names():
                return []
            return list(s.db["serve_jobs"].rows_where(order_by="created"))
        finally:
            s.close()

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self.log.close()


@pytest.fixture
def world(tmp_path):
    (tmp_path / "tiny.toml").write_text(textwrap.dedent(LOUD))
    res = build(load_spec(tmp_path / "tiny.toml"), tmp_path / "scenario")
    return res, tmp_path / "store" / "runs.db"


def _start_and_kill_mid_hunt(tmp_path: Path, res, db: Path, extra: str) -> tuple[str, int]:
    config = CONFIG.format(token=TOKEN, repo=res.repo)
    (tmp_path / "targets.toml").write_text(config.replace("concurrency = 1", "concurrency = 1\n" + extra))
    first = Serve(tmp_path, db)
    try:
        payload = json.loads((res.root / "alert.json").read_text())
        run_id = httpx.post(f"{first.url}/alerts/alertmanager", json=payload, headers=AUTH).json()["alerts"][0][
            "run_id"
        ]
        job = wait_for(lambda: next((j for j in first.jobs() if j.get("pid")), None), 60, "the hunt job to start")
        wait_for(lambda: servers_in_worktrees(job["pid"], servers_only=True), 120, "a server of the hunt")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
    finally:
        first.log.close()
    return run_id, job["pid"]


def _one_of_each(db: Path, run_id: str) -> list[dict]:
    events = Store(db).events(run_id)
    texts = [e["text"] for e in events]
    assert sum(t.startswith("confirmed") for t in texts) == 1, texts
    assert sum(t.startswith("proposed") for t in texts) == 1, texts
    return events


def test_a_service_killed_mid_hunt_takes_its_hunt_with_it_and_the_next_one_resumes_the_run(world, tmp_path):
    res, db = world
    run_id, hunt_pid = _start_and_kill_mid_hunt(tmp_path, res, db, "")
    # The hunt got SIGTERM from the kernel as the service died: it stops its servers and leaves.
    wait_for(lambda: not _alive(hunt_pid), 60, "the orphaned hunt to stop")
    wait_for(lambda: not servers_in_worktrees(hunt_pid), 30, "its servers to stop")
    assert worktrees(res.repo) == 1, subprocess.run(
        ["git", "-C", str(res.repo), "worktree", "list", "--porcelain"], capture_output=True, text=True
    ).stdout
    second = Serve(tmp_path, db)
    try:
        # The same alert again while the run is being resumed joins it (it queued a second hunt).
        payload = json.loads((res.root / "alert.json").read_text())
        again = httpx.post(f"{second.url}/alerts/alertmanager", json=payload, headers=AUTH).json()["alerts"][0]
        assert again["action"] == "joined" and again["run_id"] == run_id, again
        done = wait_for(
            lambda: next((r for r in [Store(db).run(run_id)] if r and r["status"] == "awaiting_approval"), None),
            300,
            "the resumed run to reach approval",
        )
        assert json.loads(done["verdict"])["root_cause"]["ref"] == res.truth["root_causes"][0]["ref"]
        wait_for(lambda: [j for j in second.jobs() if j["kind"] == "resume" and j["status"] == "done"], 60, "its job")
        assert [(j["kind"], j["status"]) for j in second.jobs()] == [("hunt", "interrupted"), ("resume", "done")]
    finally:
        second.stop()
    events = _one_of_each(db, run_id)
    assert sum("resumed from the last checkpoint" in e["text"] for e in events) == 1


def test_a_hunt_left_running_is_adopted_by_the_next_service_never_driven_twice(world, tmp_path):
    res, db = world
    run_id, hunt_pid = _start_and_kill_mid_hunt(tmp_path, res, db, "leave_hunts_running = true")
    assert _alive(hunt_pid)  # it outlived the service
    second = Serve(tmp_path, db)
    try:
        adopted = wait_for(lambda: [j for j in second.jobs() if j["status"] == "adopted"], 30, "the adoption")
        assert adopted[0]["pid"] == hunt_pid
        # while the orphan drives the run, nothing else is started for it
        assert not [j for j in second.jobs() if j["kind"] == "resume"]
        wait_for(lambda: not _alive(hunt_pid), 300, "the adopted hunt to end")
        job = wait_for(
            lambda: next((j for j in second.jobs() if j["id"] == adopted[0]["id"] and j["status"] == "done"), None),
            30,
            "the adopted job to be marked done",
        )
        assert job["run_id"] == run_id and not [j for j in second.jobs() if j["kind"] == "resume"]
    finally:
        second.stop()
    run = Store(db).run(run_id)
    assert run["status"] == "awaiting_approval"
    events = _one_of_each(db, run_id)
    assert not any("resumed from the last checkpoint" in e["text"] for e in events)


@pytest.mark.slow  # run by .ci/run on its own; the CLI's killed approval is in tests/test_kill_nine.py
def test_a_service_killed_during_an_approval_is_finished_by_the_next_one_with_one_revert(world, tmp_path):
    res, db = world
    (tmp_path / "targets.toml").write_text(CONFIG.format(token=TOKEN, repo=res.repo))
    first = Serve(tmp_path, db)
    try:
        payload = json.loads((res.root / "alert.json").read_text())
        run_id = httpx.post(f"{first.url}/alerts/alertmanager", json=payload, headers=AUTH).json()["alerts"][0][
            "run_id"
        ]
        wait_for(lambda: (Store(db).run(run_id) or {}).get("status") == "awaiting_approval", 300, "the proposal")
        r = httpx.post(f"{first.url}/runs/{run_id}/approve", json={"reason": "ok"}, headers=AUTH)
        assert r.status_code == 202, r.text
        # killed once the approval is recorded: the revert lands, or is about to, in its job
        wait_for(lambda: [e for e in Store(db).events(run_id) if e["kind"] == "approval"], 120, "the approval")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
    finally:
        first.log.close()
    second = Serve(tmp_path, db)
    try:
        done = wait_for(
            lambda: next((r for r in [Store(db).run(run_id)] if r and r["status"] == "concluded"), None),
            300,
            "the approval to be finished",
        )
    finally:
        second.stop()
    verdict = json.loads(done["verdict"])
    assert verdict["proposed_action"]["status"] == "applied" and verdict["after"]["median"] > 0
    events = _one_of_each(db, run_id)
    assert sum("revert landed on branch" in e["text"] for e in events) == 1
    branches = subprocess.run(
        ["git", "-C", str(res.repo), "branch", "--list", "sleuth/*"], capture_output=True, text=True
    ).stdout.split()
    assert branches == [verdict["proposed_action"]["branch"]]
    assert worktrees(res.repo) == 1, subprocess.run(
        ["git", "-C", str(res.repo), "worktree", "list", "--porcelain"], capture_output=True, text=True
    ).stdout
    # No server left registered, none left running: CI's run of this test left the killed
    # approval's re-measure server up (and its worktree), holding the lab host's GPUs for good.
    from transcripts.store import layout

    assert list(layout(db).servers.glob("*.json")) == []


def test_a_service_killed_as_an_alert_arrives_loses_nothing_once_the_alert_is_sent_again(world, tmp_path):
    import threading

    res, db = world
    (tmp_path / "targets.toml").write_text(CONFIG.format(token=TOKEN, repo=res.repo))
    payload = json.loads((res.root / "alert.json").read_text())
    first = Serve(tmp_path, db)
    try:

        def send() -> None:
            with contextlib.suppress(httpx.TransportError):  # the service may die before it answers
                httpx.post(f"{first.url}/alerts/alertmanager", json=payload, headers=AUTH, timeout=10)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()  # the kill lands before, during or after the intake: each must come out right
        time.sleep(0.01)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
        sender.join(timeout=15)
    finally:
        first.log.close()
    second = Serve(tmp_path, db)
    try:
        # Alertmanager sends a firing alert again (its retry, its repeat interval): the same one here
        r = httpx.post(f"{second.url}/alerts/alertmanager", json=payload, headers=AUTH)
        assert r.status_code == 200 and r.json()["alerts"][0]["action"] in ("queued", "joined"), r.text
        hunts = wait_for(lambda: [j for j in second.jobs() if j["kind"] in ("hunt", "resume")], 30, "the hunt job")
        time.sleep(1.0)  # a second job, if the intake were to make one, would be there by now
        hunts = [j for j in second.jobs() if j["kind"] in ("hunt", "resume")]
        runs = {j["run_id"] for j in hunts}
        assert len(runs) == 1, hunts  # one fingerprint, one run
        assert len([j for j in hunts if j["status"] in ("queued", "starting", "running")]) == 1
        stored = Store(db)
        alerts = list(stored.db["serve_alerts"].rows) if "serve_alerts" in stored.db.table_names() else []
        assert alerts and all(a["run_id"] in runs for a in alerts if a.get("run_id"))
    finally:
        second.stop()
    assert worktrees(res.repo) == 1, subprocess.run(
        ["git", "-C", str(res.repo), "worktree", "list", "--porcelain"], capture_output=True, text=True
    ).stdout


def test_a_second_service_on_the_same_store_is_refused_naming_the_first(tmp_path):
    """A second `sleuth serve` on a store another one serves started silently, marked the first's
    running job `adopted` and took its queued one: two hunts at once under concurrency = 1 (trial
    15). It is refused in one line naming the first, exit 2, and the first goes on serving; once
    the first has stopped, a service starts there again."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp_path / "targets.toml").write_text(CONFIG.format(token=TOKEN, repo=repo))
    db = tmp_path / "store" / "runs.db"
    first = Serve(tmp_path, db)
    try:
        where = ["--bind", f"127.0.0.1:{free_port()}", "--config", str(tmp_path / "targets.toml"), "--db", str(db)]
        second = subprocess.run([sleuth_exe(), "serve", *where], capture_output=True, text=True, timeout=120)
        said = second.stderr.strip()
        assert second.returncode == 2 and said.startswith(
            f"error: --db: {db}: another sleuth serve serves this store (pid {first.proc.pid} "
        ), said
        assert len(said.splitlines()) == 1 and httpx.get(f"{first.url}/health").status_code == 200
        # What it does is in its own output (it had held only its banner): here, an alert no
        # target matches (a typo in a target's labels leaves every alert so).
        stray = {**FIRING, "alerts": [{**FIRING["alerts"][0], "labels": {"alertname": "Other"}}]}
        r = httpx.post(f"{first.url}/alerts/alertmanager", json=stray, headers=AUTH)
        assert r.json()["alerts"][0]["action"] == "unmatched"
        fp = r.json()["alerts"][0]["fingerprint"]
        wait_for(lambda: f"alert {fp} firing (alertmanager): unmatched" in first.output(), 30, "the service's line")
    finally:
        first.stop()
    again = Serve(tmp_path, db)  # the first has stopped: its hold went with it
    again.stop()
