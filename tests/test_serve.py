"""`sleuth serve`: Alertmanager webhooks (firing, resolved, malformed) and plain alerts over real
HTTP, the bearer token on every mutation, the queue surviving a restart, and one end-to-end run in
a real headless Chromium: an alert for a lab scenario, the run awaiting approval, Approve clicked,
the recovered throughput on the page."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from agent.serve.app import create_app
from agent.serve.config import load_config
from agent.serve.queue import HuntQueue
from evals.burst import BASE
from evals.fingerprint import added_refs, fingerprint
from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import sleuth_exe, sleuth_in_process, wait_for
from tests.test_eval import LOUD
from transcripts.store import Store, layout

TOKEN = "s3cret-token-for-tests"
CONFIG = """
token = "{token}"
concurrency = 1

[[targets]]
name = "minisglang"
match = {{ alertname = "ThroughputRegression", service = "minisglang" }}
repo = "{repo}"
budget = {{ max_probes = 12, max_wall_s = 600, samples = 3 }}
"""
FIRING = {
    **BASE,  # the webhook envelope the burst's payloads share (evals.burst)
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "ThroughputRegression", "service": "minisglang", "host": "gpu-node-1"},
            "annotations": {},
            "startsAt": "2026-12-02T09:00:00Z",
            "fingerprint": "708aa88aebecc4c0",
        }
    ],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """The FastAPI app on uvicorn in a thread, on 127.0.0.1, over real HTTP; its queue not started,
    so what the alerts queue stays inspectable (the end-to-end test runs the real thing)."""

    def __init__(self, tmp: Path, config_text: str, command: list[str] | None = None) -> None:
        (tmp / "targets.toml").write_text(config_text)
        self.db = tmp / "runs.db"
        self.cfg = load_config(tmp / "targets.toml")
        self.queue = HuntQueue(self.cfg, self.db, command=command)
        self.port = free_port()
        app = create_app(self.cfg, self.db, self.queue)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Service:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.queue.store.close()


# What a Prometheus rule does not know, the target names (appended to its table).
TARGET_EXTRA = """launch = "exec {worktree}/serve.sh --port {port}"
benchmark = "sleuth bench --model m --requests 2 --max-tokens 16"
metric = "output_tok_per_s"
"""


@pytest.fixture
def service(tmp_path):
    with Service(tmp_path, CONFIG.format(token=TOKEN, repo=tmp_path / "repo") + TARGET_EXTRA) as s:
        yield s


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_a_firing_alert_queues_a_hunt_and_a_repeat_joins_it(service):
    r = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH)
    assert r.status_code == 200, r.text
    first = r.json()["alerts"][0]
    assert (
        first["action"] == "queued" and first["target"] == "minisglang" and first["fingerprint"] == "708aa88aebecc4c0"
    )
    again = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
    assert again["action"] == "joined" and again["run_id"] == first["run_id"]
    runs = httpx.get(f"{service.url}/runs").json()["runs"]
    assert [(r["id"], r["status"]) for r in runs] == [(first["run_id"], "queued")]
    # `target` says what the run's row will say once it starts (the repo); the name, beside it
    assert runs[0]["target"].endswith("/repo") and runs[0]["service_target"] == "minisglang", runs[0]
    one = httpx.get(f"{service.url}/runs/{first['run_id']}").json()
    assert one["status"] == "queued" and one["job"]["kind"] == "hunt"
    # The job's alert file holds the merged alert (common labels and annotations, the alert's own),
    # completed by what the target names (the launch and benchmark a Prometheus rule does not know).
    alert = json.loads(Path(one["job"]["alert"]).read_text())
    assert alert["labels"]["host"] == "gpu-node-1" and alert["annotations"]["good_value"] == "89"
    assert alert["annotations"]["launch_command"] == "exec {worktree}/serve.sh --port {port}"
    assert alert["annotations"]["benchmark_command"].startswith("sleuth bench --model m ")
    assert alert["labels"]["metric"] == "output_tok_per_s"


def test_a_plain_alert_is_keyed_as_alertmanager_keys_it_so_either_way_it_is_one_alert(service):
    """A trial posted one alert to `/alerts` and the same labels through the webhook: two keys,
    two hunts of one regression. The key of a plain alert is Alertmanager's own fingerprint
    (prometheus/common's test vectors), so Alertmanager's repeat of it joins its hunt."""
    from agent.serve.payloads import labels_fingerprint

    assert (
        labels_fingerprint({"name": "garland, briggs", "fear": "love is not enough"}) == f"{5799056148416392346:016x}"
    )
    assert labels_fingerprint({"first-label": "first-label-value"}) == f"{5146282821936882169:016x}"
    labels = FIRING["alerts"][0]["labels"]
    plain = httpx.post(f"{service.url}/alerts", json={"labels": labels}, headers=AUTH).json()
    assert plain["action"] == "queued" and plain["fingerprint"] == labels_fingerprint(labels), plain
    as_alertmanager_sends_it = {**FIRING, "alerts": [{**FIRING["alerts"][0], "fingerprint": plain["fingerprint"]}]}
    again = httpx.post(f"{service.url}/alerts/alertmanager", json=as_alertmanager_sends_it, headers=AUTH).json()
    assert again["alerts"][0]["action"] == "joined" and again["alerts"][0]["run_id"] == plain["run_id"], again


def test_a_repeat_of_an_alert_whose_hunt_awaits_a_decision_joins_that_run(service):
    """Alertmanager sends a firing alert again every repeat_interval: each repeat after the hunt
    had ended started a whole new hunt of the same regression, and a trial's repository held six
    runs awaiting approval for one culprit. While the last hunt awaits a person, a repeat joins
    it; once decided, a repeat is hunted again (the fix may not have reached the node)."""
    first = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
    (job,) = service.queue._jobs("run_id = ?", [first["run_id"]])
    service.queue._update_job(job["id"], status="done")  # the hunt ran, and now waits for a person
    store = Store(service.db)
    try:
        store.start_run(first["run_id"], status="awaiting_approval")
        again = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
        assert again["action"] == "joined" and again["run_id"] == first["run_id"], again
        store.update_run(first["run_id"], status="concluded")  # approved or rejected
        later = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
        assert later["action"] == "queued" and later["run_id"] != first["run_id"], later
    finally:
        store.close()


def test_a_resolved_alert_is_recorded_and_starts_nothing(service):
    resolved = {**FIRING, "status": "resolved", "alerts": [{**FIRING["alerts"][0], "status": "resolved"}]}
    r = httpx.post(f"{service.url}/alerts/alertmanager", json=resolved, headers=AUTH)
    assert r.status_code == 200 and r.json()["alerts"][0]["action"] == "recorded"
    assert httpx.get(f"{service.url}/runs").json()["runs"] == []
    rows = list(Store(service.db).db["serve_alerts"].rows)
    assert [(a["status"], a["action"]) for a in rows] == [("resolved", "recorded")]


def test_an_alert_with_nothing_to_launch_is_refused_on_arrival(tmp_path):
    """A target with no `launch` and an alert without annotations.launch_command: it was queued,
    and its hunt job failed later with "annotations.launch_command missing" naming a file the
    service wrote. The answer says so, and no hunt is queued."""
    with Service(tmp_path, CONFIG.format(token=TOKEN, repo=tmp_path / "repo")) as s:
        bare = {**FIRING, "alerts": [{**FIRING["alerts"][0], "annotations": {"summary": "slower"}}]}
        bare["commonAnnotations"] = {}
        r = httpx.post(f"{s.url}/alerts/alertmanager", json=bare, headers=AUTH).json()["alerts"][0]
        assert r["action"] == "refused" and r["run_id"] is None, r
        assert r["error"].startswith("target 'minisglang' names no `launch` and the alert no annotations."), r
        assert httpx.get(f"{s.url}/runs").json()["runs"] == []


def test_a_resolution_is_recorded_beside_the_hunt_its_firing_started(service):
    """The hunt goes on (a regression that flaps is still one), and the resolution names its run:
    it said run_id null, and nothing tied the two."""
    resolved = {**FIRING, "status": "resolved", "alerts": [{**FIRING["alerts"][0], "status": "resolved"}]}
    first = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
    r = httpx.post(f"{service.url}/alerts/alertmanager", json=resolved, headers=AUTH).json()["alerts"][0]
    assert r["action"] == "recorded" and r["run_id"] == first["run_id"], r
    assert [(x["id"], x["status"]) for x in httpx.get(f"{service.url}/runs").json()["runs"]] == [
        (first["run_id"], "queued")
    ]


def test_an_alert_no_target_matches_is_answered_unmatched(service):
    plain = {"labels": {"alertname": "DiskFull"}, "annotations": {"summary": "disk"}}
    r = httpx.post(f"{service.url}/alerts", json=plain, headers=AUTH)
    assert r.status_code == 200 and r.json()["action"] == "unmatched" and r.json()["run_id"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p.pop("version"), ["body", "version"]),
        (lambda p: p.update(version="3"), ["body", "version"]),
        (lambda p: p.update(alerts=[]), ["body", "alerts"]),
        (lambda p: p["alerts"][0].update(status="pending"), ["body", "alerts", 0, "status"]),
        (lambda p: p["alerts"][0].pop("labels"), ["body", "alerts", 0, "labels"]),
    ],
)
def test_a_malformed_payload_gets_422_naming_the_field(service, change, field):
    payload = json.loads(json.dumps(FIRING))
    change(payload)
    r = httpx.post(f"{service.url}/alerts/alertmanager", json=payload, headers=AUTH)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == field
    assert httpx.get(f"{service.url}/runs").json()["runs"] == []  # nothing queued


def test_mutations_need_the_bearer_token_reads_on_loopback_do_not(service):
    missing = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING)
    assert missing.status_code == 401 and missing.json()["detail"] == "a bearer token is required"
    wrong = {"Authorization": "Bearer nope"}
    mismatch = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=wrong)
    assert mismatch.status_code == 401 and mismatch.json()["detail"] == "the bearer token does not match"
    assert httpx.post(f"{service.url}/runs/any/approve", json={}).status_code == 401
    assert httpx.get(f"{service.url}/runs").status_code == 200
    assert httpx.get(f"{service.url}/runs/nope").status_code == 404
    page = httpx.get(f"{service.url}/", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "perf-sleuth runs" in page.text


def test_without_a_configured_token_mutations_are_refused(tmp_path):
    with Service(tmp_path, CONFIG.replace('token = "{token}"\n', "").format(repo=tmp_path)) as s:
        r = httpx.post(f"{s.url}/alerts/alertmanager", json=FIRING, headers=AUTH)
        assert r.status_code == 403 and "set token in the config or SLEUTH_TOKEN" in r.json()["detail"]


def test_approving_a_run_that_is_not_waiting_is_a_conflict(service):
    s = Store(service.db)
    s.start_run("r1", status="concluded")
    s.close()
    r = httpx.post(f"{service.url}/runs/r1/approve", json={"reason": "ok"}, headers=AUTH)
    assert r.status_code == 409 and "not awaiting approval (concluded)" in r.json()["detail"]
    r = httpx.post(f"{service.url}/runs/r1/reject", json={"reason": " "}, headers=AUTH)
    assert r.status_code in (409, 422)


def test_the_list_of_runs_says_what_a_person_decided(service):
    """Approved and rejected runs both read "concluded" in the list (trial 15): a decision column,
    in the JSON and on the page, from each run's verdict."""
    s = Store(service.db)
    verdict = {"proposed_action": {"kind": "revert", "status": "rejected", "reason": "not now"}}
    s.start_run("r1", status="concluded", verdict=json.dumps(verdict))
    s.close()
    (row,) = httpx.get(f"{service.url}/runs").json()["runs"]
    assert row["status"] == "concluded" and row["action"] == "revert rejected", row
    page = httpx.get(f"{service.url}/runs", headers={"Accept": "text/html"}).text
    assert "<th>decision</th>" in page and "<td>revert rejected</td>" in page


def test_an_approval_while_a_rejection_is_queued_is_a_conflict_not_dropped(service):
    """It answered 202 with the rejection's job in its body, and the approval was dropped without a
    word (trial 15). The same decision twice still gets the one job."""
    s = Store(service.db)
    s.start_run("r1", status="awaiting_approval")
    s.close()
    first = httpx.post(f"{service.url}/runs/r1/reject", json={"reason": "not now"}, headers=AUTH)
    assert first.status_code == 202, first.text
    again = httpx.post(f"{service.url}/runs/r1/reject", json={"reason": "not now"}, headers=AUTH)
    assert again.status_code == 202 and again.json()["job"]["id"] == first.json()["job"]["id"]
    r = httpx.post(f"{service.url}/runs/r1/approve", json={"reason": "ok"}, headers=AUTH)
    assert r.status_code == 409 and r.json()["detail"] == "run 'r1' has a reject queued already (not now)", r.text


def test_a_restarted_service_continues_what_the_last_one_left(tmp_path):
    """Jobs the last service left 'running' come back: a hunt that never got a run row starts
    again, a hunt whose run checkpointed is resumed, an approval whose run still waits is redone."""
    (tmp_path / "t.toml").write_text(CONFIG.format(token=TOKEN, repo=tmp_path))
    cfg = load_config(tmp_path / "t.toml")
    db = tmp_path / "runs.db"
    s = Store(db)
    s.start_run("started", status="running")
    s.start_run("waiting", status="awaiting_approval")
    s.db["serve_jobs"].insert_all(
        [
            {
                "id": "j1",
                "created": 1,
                "status": "running",
                "kind": "hunt",
                "run_id": "never",
                "fingerprint": "f1",
                "target": "minisglang",
                "alert": "a1.json",
            },
            {
                "id": "j2",
                "created": 2,
                "status": "running",
                "kind": "hunt",
                "run_id": "started",
                "fingerprint": "f2",
                "target": "minisglang",
                "alert": "a2.json",
            },
            {
                "id": "j3",
                "created": 3,
                "status": "running",
                "kind": "approve",
                "run_id": "waiting",
                "reason": "ok",
                "branch": None,
                "fingerprint": None,
                "target": None,
                "alert": None,
            },
            {
                "id": "j4",
                "created": 4,
                "status": "queued",
                "kind": "hunt",
                "run_id": "later",
                "fingerprint": "f4",
                "target": "minisglang",
                "alert": "a4.json",
            },
        ],
        pk="id",
    )
    s.close()
    q = HuntQueue(cfg, db)
    jobs = {j["id"]: j for j in q._jobs()}
    assert {jobs[j]["status"] for j in ("j1", "j2", "j3")} == {"interrupted"} and jobs["j4"]["status"] == "queued"
    again = sorted((j["kind"], j["run_id"]) for j in jobs.values() if j["id"] not in ("j1", "j2", "j3", "j4"))
    assert again == [("approve", "waiting"), ("hunt", "never"), ("resume", "started")]
    q.store.close()


def _queue(
    tmp_path: Path, stand_in: list[str], db: Path | None = None, edit: tuple[str, str] = ("", ""), **kw
) -> HuntQueue:
    """A queue over the test target (``edit``: one replacement in its config) whose jobs run
    ``stand_in`` instead of sleuth."""
    (tmp_path / "t.toml").write_text(CONFIG.format(token=TOKEN, repo=tmp_path / "repo").replace(*edit) + TARGET_EXTRA)
    return HuntQueue(load_config(tmp_path / "t.toml"), db or tmp_path / "runs.db", command=stand_in, **kw)


def test_the_queue_runs_each_job_as_a_process_with_the_targets_options(tmp_path):
    """The job's process is real (a stand-in for sleuth that records its argv); at most
    ``concurrency`` at a time; its exit code lands on the job."""
    recorder = tmp_path / "argv.json"
    stand_in = [sys.executable, "-c", f"import json, sys; open({str(recorder)!r}, 'w').write(json.dumps(sys.argv[1:]))"]
    q = _queue(tmp_path, stand_in)
    from agent.serve.payloads import Alert

    taken = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")
    q.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and q.job_for_run(taken["run_id"])["status"] != "done":
        time.sleep(0.05)
    q.stop()
    argv = json.loads(recorder.read_text())
    assert argv[:2] == ["hunt", "--alert"] and argv[3:5] == ["--run-id", taken["run_id"]]
    assert argv[argv.index("--repo") + 1] == str(tmp_path / "repo")
    assert argv[argv.index("--samples") + 1] == "3" and argv[argv.index("--max-probes") + 1] == "12"
    assert argv[-3:] == ["--db", str(tmp_path / "runs.db"), "--json"]


def _failed(q: HuntQueue, run_id: str) -> dict | None:
    job = q.job_for_run(run_id)
    return job if job is not None and job["status"] == "failed" else None


def test_a_job_that_runs_far_past_its_wall_budget_is_stopped_and_frees_its_slot(tmp_path):
    """A hunt process that hangs (a stuck SSH session, a deadlock) must not hold the one slot (and
    the node's GPUs) for ever: at its target's wall budget plus the grace to clean up it is sent
    SIGTERM (then SIGKILL), the job fails saying so, and the alert queued behind it runs."""
    marker, done = tmp_path / "first", tmp_path / "second"
    # the first job ignores SIGTERM and hangs; the second records that it ran
    stand_in = [sys.executable, "-c", textwrap.dedent(f"""
        import pathlib, signal, time
        if not pathlib.Path({str(marker)!r}).exists():
            pathlib.Path({str(marker)!r}).touch()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
        pathlib.Path({str(done)!r}).touch()
    """)]  # fmt: skip
    q = _queue(tmp_path, stand_in, edit=("max_wall_s = 600", "max_wall_s = 1"), grace_s=1.0)
    q.start()
    try:
        from agent.serve.payloads import Alert

        first = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")
        other = {"alertname": "ThroughputRegression", "service": "minisglang", "host": "gpu-node-2"}
        second = q.take(Alert(labels=other), "plain")
        job = wait_for(lambda: _failed(q, first["run_id"]), 60, "the hung job to be stopped")
        assert "ran past its wall budget (1 s) and 1 s to clean up" in job["error"], job
        assert f"sleuth resume {first['run_id']}" in job["error"] and job["exit_code"] == -signal.SIGKILL
        wait_for(lambda: q.job_for_run(second["run_id"])["status"] == "done", 60, "the next job to run")
        assert done.exists()
    finally:
        q.stop()


def test_a_queued_hunt_cancelled_never_starts_and_the_next_firing_is_hunted_anew(service):
    """A trial could not stop a hunt of a false alarm but by stopping the whole service."""
    first = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
    assert httpx.post(f"{service.url}/runs/{first['run_id']}/cancel").status_code == 401  # the token, as any POST
    r = httpx.post(f"{service.url}/runs/{first['run_id']}/cancel", headers=AUTH)
    assert r.status_code == 202 and r.json()["job"]["status"] == "cancelled", r.text
    runs = httpx.get(f"{service.url}/runs").json()["runs"]
    assert [(x["id"], x["status"]) for x in runs] == [(first["run_id"], "cancelled")]
    again = httpx.post(f"{service.url}/runs/{first['run_id']}/cancel", headers=AUTH)
    assert again.status_code == 409 and "no queued or running hunt" in again.json()["detail"]
    repeat = httpx.post(f"{service.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
    assert repeat["action"] == "queued" and repeat["run_id"] != first["run_id"], repeat


def test_a_running_hunt_cancelled_is_stopped_and_not_continued(tmp_path):
    started = tmp_path / "started"
    stand_in = [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(600)"]
    q = _queue(tmp_path, stand_in)
    from agent.serve.payloads import Alert

    taken = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")
    q.start()
    try:
        wait_for(started.exists, 60, "the hunt to start")
        pid = q.job_for_run(taken["run_id"])["pid"]
        q.store.start_run(taken["run_id"], status="running")  # it had begun its run
        assert q.cancel(taken["run_id"]) is not None
        job = wait_for(lambda: (j := q.job_for_run(taken["run_id"]))["status"] == "cancelled" and j, 60, "the end")
        assert job["exit_code"] == -signal.SIGTERM and job["kind"] == "hunt"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert q.cancel(taken["run_id"]) is None  # nothing left to cancel
    finally:
        q.stop()
    s = Store(tmp_path / "runs.db")
    try:
        kinds = [(j["kind"], j["status"]) for j in s.db["serve_jobs"].rows_where(order_by="created")]
    finally:
        s.close()
    assert kinds == [("hunt", "cancelled")]  # no resumption queued, then or at the stop


def test_a_service_stopped_cleanly_says_at_once_how_each_job_ended_and_queues_what_continues_it(tmp_path):
    """A trial's job rows said `running` after a clean SIGTERM to the service, until the next
    start. Now a hunt whose run had reached approval is `done`, one mid-way `interrupted` with its
    resumption queued for the next start (which runs it as before)."""
    db, started = tmp_path / "runs.db", tmp_path / "started"
    started.mkdir()
    # each stand-in hunt records that it runs, then waits for the service's SIGTERM
    stand_in = [sys.executable, "-c", textwrap.dedent(f"""
        import pathlib, sys, time
        run_id = sys.argv[sys.argv.index("--run-id") + 1]
        pathlib.Path({str(started)!r}, run_id).touch()
        time.sleep(600)
    """)]  # fmt: skip
    q = _queue(tmp_path, stand_in, db, edit=("concurrency = 1", "concurrency = 2"))
    from agent.serve.payloads import Alert

    ended = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")
    other = {"alertname": "ThroughputRegression", "service": "minisglang", "host": "gpu-node-2"}
    midway = q.take(Alert(labels=other), "plain")
    q.start()
    try:
        wait_for(lambda: len(list(started.iterdir())) == 2, 60, "both hunts to start")
        q.store.start_run(ended["run_id"], status="awaiting_approval")
        q.store.start_run(midway["run_id"], status="running")
    finally:
        q.stop()
    s = Store(db)
    try:
        jobs = list(s.db["serve_jobs"].rows_where(order_by="created"))
    finally:
        s.close()
    course = [(j["kind"], j["run_id"], j["status"]) for j in jobs]
    assert course == [
        ("hunt", ended["run_id"], "done"),
        ("hunt", midway["run_id"], "interrupted"),
        ("resume", midway["run_id"], "queued"),
    ], course


def test_an_adopted_job_whose_driver_outlives_its_budget_is_given_up_not_watched_for_ever(tmp_path):
    """A restarted service watches a hunt the last one left running; when that driver is still
    there far past its budget, the job fails naming its pid (not this service's process to kill)."""
    (tmp_path / "t.toml").write_text(
        CONFIG.format(token=TOKEN, repo=tmp_path / "repo").replace("max_wall_s = 600", "max_wall_s = 1") + TARGET_EXTRA
    )
    db = tmp_path / "runs.db"
    run_dir = layout(db).runs / "r-left"
    run_dir.mkdir(parents=True)
    driver = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(run_dir / "driver.lock")!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip() == "held"
        store = Store(db)
        store.db["serve_jobs"].insert(
            {"id": "j1", "created": 1, "status": "running", "kind": "hunt", "run_id": "r-left", "target": "minisglang",
             "started": time.time(), "pid": driver.pid},
            pk="id",
        )  # fmt: skip
        store.close()
        q = HuntQueue(load_config(tmp_path / "t.toml"), db, grace_s=1.0)
        try:
            assert q.job_for_run("r-left")["status"] == "adopted"
            job = wait_for(lambda: _failed(q, "r-left"), 60, "the adoption to be given up")
            assert f"its driver (pid {driver.pid}) still runs: ran past its wall budget (1 s)" in job["error"], job
            assert driver.poll() is None  # left alone
        finally:
            q.stop()
    finally:
        driver.kill()
        driver.wait(timeout=10)


# A stand-in for ``sleuth hunt`` / ``sleuth resume`` whose store fails under it: it checkpoints the
# run (its row left "running", or "failed" with a store error where that could be written) and
# exits 1 with store_guard's line; from the call given by ``heals_at`` on (0: never) the store has
# room again and the run ends.
STORE_DOWN = """
import pathlib, sys
from transcripts.store import Store
argv = sys.argv[1:]
run_id = argv[argv.index("--run-id") + 1] if argv[0] == "hunt" else argv[1]
store = Store(argv[argv.index("--db") + 1])
calls = pathlib.Path({calls!r})
calls.write_text(calls.read_text() + argv[0] + "\\n" if calls.exists() else argv[0] + "\\n")
if {heals_at} and len(calls.read_text().split()) > {heals_at}:
    store.update_run(run_id, status="concluded")
    sys.exit(0)
store.start_run(run_id)
if {heals_at}:  # the row could still be written (a lock that came and went): graph._stopped's words
    store.update_run(run_id, status="failed", error="store: database is locked (stopped at its last checkpoint)")
print(f"error: STORE: database or disk is full; run {{run_id}} stopped at its last checkpoint")
sys.exit(1)
"""


def _store_down_queue(tmp_path, heals_at: int) -> tuple[HuntQueue, Path]:
    (tmp_path / "t.toml").write_text(CONFIG.format(token=TOKEN, repo=tmp_path / "repo") + TARGET_EXTRA)
    calls = tmp_path / "calls.txt"
    stand_in = [sys.executable, "-c", STORE_DOWN.format(calls=str(calls), heals_at=heals_at)]
    return HuntQueue(load_config(tmp_path / "t.toml"), tmp_path / "runs.db", command=stand_in, store_retry_s=0.3), calls


def test_a_run_its_store_stopped_is_resumed_later_by_the_service(tmp_path):
    """A full disk stops a hunt at its last checkpoint (exit 1, its run still 'running', no
    driver): the service does not call that done. It resumes the run after ``store_retry_s``, and
    the resumption, the disk having room again, ends it."""
    q, calls = _store_down_queue(tmp_path, heals_at=1)
    q.start()
    try:
        from agent.serve.payloads import Alert

        taken = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")
        run_id = taken["run_id"]
        wait_for(lambda: (q.store.run(run_id) or {}).get("status") == "concluded", 60, "the run to end")
        wait_for(lambda: q.job_for_run(run_id)["status"] == "done", 60, "the resumption's job to be done")
        first, again = q._jobs("run_id = ?", [run_id])
        assert first["status"] == "interrupted" and "STORE: database or disk is full" in first["error"], first
        assert again["kind"] == "resume" and again["retry_of"] == first["id"]
        assert again["started"] >= first["ended"] + 0.3  # not at once: the disk needs time
        assert calls.read_text().split() == ["hunt", "resume"]
    finally:
        q.stop()


def test_a_store_that_stays_down_is_tried_three_times_then_the_job_fails_with_the_reason(tmp_path):
    q, calls = _store_down_queue(tmp_path, heals_at=0)
    q.store_retry_s = 0.05  # 0.05, 0.2, 0.8 s
    q.start()
    try:
        from agent.serve.payloads import Alert

        run_id = q.take(Alert(labels={"alertname": "ThroughputRegression", "service": "minisglang"}), "plain")["run_id"]
        last = wait_for(lambda: _failed(q, run_id), 60, "the last try to fail")
        assert "STORE: database or disk is full" in last["error"] and "(gave up after 3 tries)" in last["error"]
        assert [j["status"] for j in q._jobs("run_id = ?", [run_id])] == ["interrupted"] * 3 + ["failed"]
        assert calls.read_text().split() == ["hunt", "resume", "resume", "resume"]
    finally:
        q.stop()


def test_a_hunt_that_cannot_start_shows_as_failed_with_its_reason(tmp_path):
    refuses = [
        sys.executable,
        "-c",
        "import sys; print('error: --repo: /nowhere is not a git repository'); sys.exit(2)",
    ]
    with Service(tmp_path, CONFIG.format(token=TOKEN, repo="/nowhere") + TARGET_EXTRA, command=refuses) as s:
        run_id = httpx.post(f"{s.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]["run_id"]
        s.queue.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and httpx.get(f"{s.url}/runs/{run_id}").json()["status"] == "queued":
            time.sleep(0.05)
        one = httpx.get(f"{s.url}/runs/{run_id}").json()
        assert one["status"] == "failed" and one["error"] == "error: --repo: /nowhere is not a git repository"
        listed = httpx.get(f"{s.url}/runs").json()["runs"]
        assert [(r["id"], r["status"]) for r in listed] == [(run_id, "failed")]
        # the same alert again starts a new hunt: the failed one is not "running"
        again = httpx.post(f"{s.url}/alerts/alertmanager", json=FIRING, headers=AUTH).json()["alerts"][0]
        assert again["action"] == "queued" and again["run_id"] != run_id
        s.queue.stop()


def test_serve_bad_input_is_one_line_exit_2(tmp_path):
    (tmp_path / "bad.toml").write_text("concurrency = 0\n")
    proc = sleuth_in_process("serve", "--config", tmp_path / "bad.toml")
    assert (
        proc.returncode == 2 and "--config: " in proc.stderr and "concurrency: Input should be greater" in proc.stderr
    )
    proc = sleuth_in_process("serve", "--bind", "localhost")
    assert proc.returncode == 2 and "--bind: 'localhost' is not HOST:PORT" in proc.stderr
    with socket.socket() as taken:  # another process listens there: one line, no banner, not exit 3
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        bind = f"127.0.0.1:{taken.getsockname()[1]}"
        proc = sleuth_in_process("serve", "--bind", bind, "--db", tmp_path / "r.db")
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: --bind: {bind}: Address already in use")
    assert "sleuth serve on" not in proc.stderr + proc.stdout
    proc = sleuth_in_process("hunt", "--repo", tmp_path, "--bench", "true", "--good", "HEAD", "--run-id", "../x")
    assert proc.returncode == 2 and "--run-id" in proc.stderr


def test_a_target_path_that_cannot_work_here_is_refused_when_the_service_starts(tmp_path):
    """A typo in a local target's repo failed each alert's hunt job in turn, after the alert came;
    now `sleuth serve` says it at start, one line naming the file and the field, exit 2. A remote
    host's paths are its own, not checked here; the ssh files named are read here, so checked."""
    from agent.serve.config import local_problem

    base = 'token = "t"\n[[targets]]\nname = "n"\nmatch = { host = "h" }\n'
    (tmp_path / "plain").mkdir()
    for extra, said in (
        (
            f'repo = "{tmp_path}/nope"\n',
            f"targets[0].repo: '{tmp_path}/nope' is not a folder on this machine (the target has no host)",
        ),
        (f'repo = "{tmp_path}/plain"\n', f"targets[0].repo: '{tmp_path}/plain' is not a git repository"),
        ('repo = "/srv/r"\nhost = "gpu1"\nknown_hosts = "/no/kh"\n', "targets[0].known_hosts: '/no/kh' is not a file"),
    ):
        (tmp_path / "t.toml").write_text(base + extra)
        proc = sleuth_in_process("serve", "--config", tmp_path / "t.toml", "--db", tmp_path / "r.db")
        assert proc.returncode == 2 and proc.stderr.strip() == f"error: --config: {tmp_path / 't.toml'}: {said}"
        assert "sleuth serve on" not in proc.stdout and not (tmp_path / "r.db").exists()
    (tmp_path / "t.toml").write_text(base + 'repo = "/srv/r"\nhost = "gpu1"\n')
    assert local_problem(load_config(tmp_path / "t.toml")) is None  # on gpu1, not here


# -- end to end: a real service process, a real hunt, a real browser ------------------------------
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _chromium_or_skip() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("SLEUTH_REQUIRE_BROWSER"):
            pytest.fail("SLEUTH_REQUIRE_BROWSER is set but /usr/bin/chromium is missing (apt-get install chromium)")
        pytest.skip("no chromium here (apt-get install chromium; .ci/run installs it)")


def test_an_alert_ends_with_a_person_approving_on_the_page_and_the_recovery_shown(tmp_path):
    _chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    (tmp_path / "tiny.toml").write_text(textwrap.dedent(LOUD))
    res = build(load_spec(tmp_path / "tiny.toml"), tmp_path / "scenario")
    before = fingerprint(res.repo)
    (tmp_path / "targets.toml").write_text(CONFIG.format(token=TOKEN, repo=res.repo))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "store" / "runs.db"
    serve = subprocess.Popen(
        [
            sleuth_exe(),
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--config",
            str(tmp_path / "targets.toml"),
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        payload = json.loads((res.root / "alert.json").read_text())
        run_id = httpx.post(f"{url}/alerts/alertmanager", json=payload, headers=AUTH).json()["alerts"][0]["run_id"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"{url}/")
            expect(page.get_by_role("link", name=run_id)).to_be_visible()
            page.get_by_role("link", name=run_id).click()
            # The page follows the hunt (it reloads itself while it runs) until it waits for a person.
            try:
                expect(page.locator("#status")).to_have_text("awaiting approval", timeout=240_000)
            except AssertionError:  # say why the hunt ended elsewhere: its verdict, from the service
                verdict = httpx.get(f"{url}/runs/{run_id}", headers=AUTH | {"Accept": "application/json"}).text[:4000]
                raise AssertionError(f"the hunt did not reach approval: {verdict}") from None
            expect(page.locator("#root-cause")).to_contain_text(res.truth["root_causes"][0]["ref"])
            row = next(r for r in httpx.get(f"{url}/runs").json()["runs"] if r["id"] == run_id)
            assert row["target"].startswith(str(res.repo)) and row["service_target"] == "minisglang", row
            # The proposed branch name is taken (a person's own branch): that approval is refused,
            # the page says why, and the run still waits; approved again under another name.
            culprit = res.truth["root_causes"][0]["ref"]
            subprocess.run(["git", "-C", str(res.repo), "branch", f"sleuth/revert-{culprit[:10]}"], check=True)
            page.fill("#token", TOKEN)
            page.once("dialog", lambda d: d.accept())
            page.click("#approve")
            expect(page.locator("#decision-error")).to_contain_text(
                f"branch 'sleuth/revert-{culprit[:10]}' already exists", timeout=120_000
            )
            expect(page.locator("#status")).to_have_text("awaiting approval")
            page.fill("#reason", "the A/B is convincing")
            page.fill("#branch", "perf/revert-the-fence")
            page.fill("#token", TOKEN)
            page.once("dialog", lambda d: d.accept())
            page.click("#approve")
            expect(page.locator("#after")).to_contain_text("of the drop recovered", timeout=180_000)
            expect(page.locator("#status")).to_have_text("concluded")
            expect(page.locator("#action-status")).to_have_text("applied")
            expect(page.locator("#action-reason")).to_have_text("the A/B is convincing")  # the reviewer's words
            expect(page.locator("#after")).to_contain_text("HEAD")  # re-measured beside HEAD on fresh launches
            browser.close()
        v = httpx.get(f"{url}/runs/{run_id}").json()["verdict"]
        assert v["proposed_action"]["status"] == "applied" and v["after"]["recovered_pct_of_drop"] > 50
        approval = [e for e in Store(db).events(run_id) if e["kind"] == "approval"]
        assert "the A/B is convincing" in approval[0]["text"]
        # The revert landed on the branch named on the page; the user's checkout and its uncommitted
        # work are as they were (the other new branch is the one the test made).
        assert v["proposed_action"]["branch"] == "perf/revert-the-fence"
        after = fingerprint(res.repo)
        made = f"refs/heads/sleuth/revert-{culprit[:10]}"
        assert added_refs(before, after) == ["refs/heads/perf/revert-the-fence", made]
    finally:
        serve.terminate()
        out, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, out[-3000:]


def test_a_target_names_a_latency_metric_and_the_alert_it_completes_carries_its_direction(tmp_path):
    from agent.serve.config import ConfigError

    base = 'token = "t"\n[[targets]]\nname = "n"\nmatch = { host = "h" }\nrepo = "/srv/r"\n'
    (tmp_path / "t.toml").write_text(base + 'metric = "p99_ttft_ms"\n')
    target = load_config(tmp_path / "t.toml").targets[0]
    labels, ann = target.complete({"host": "h"}, {})
    assert labels["metric"] == "p99_ttft_ms" and "direction" not in ann  # the hunt reads it from the name
    (tmp_path / "t.toml").write_text(base + 'metric = "output_throughput"\nlower_is_better = true\n')
    assert load_config(tmp_path / "t.toml").targets[0].complete({}, {})[1]["direction"] == "lower_is_better"
    for bad, field in (('metric = "p42_ttft_ms"', "metric"), ('metric = "verify_count"', "metric")):
        (tmp_path / "t.toml").write_text(base + bad + "\n")
        with pytest.raises(ConfigError, match=field):
            load_config(tmp_path / "t.toml")


def test_a_target_whose_benchmark_is_not_a_sleuth_bench_line_is_refused_when_the_file_is_read(tmp_path):
    """The service hunts servers; a project's own benchmark command (a new user's first guess)
    failed only when an alert came, as `annotations.benchmark_command unusable`."""
    from agent.serve.config import ConfigError

    base = 'token = "t"\n[[targets]]\nname = "n"\nmatch = { host = "h" }\nrepo = "/srv/r"\n'
    (tmp_path / "t.toml").write_text(base + 'benchmark = "python3 /srv/bench.py 150"\n')
    with pytest.raises(ConfigError, match=r"benchmark: 'python3 /srv/bench.py 150' is not a `sleuth bench --model M"):
        load_config(tmp_path / "t.toml")
    (tmp_path / "t.toml").write_text(base + 'benchmark = "sleuth bench --model M --requests 8"\n')
    assert load_config(tmp_path / "t.toml").targets[0].benchmark == "sleuth bench --model M --requests 8"


def test_a_run_with_no_root_cause_says_why_on_its_page():
    """An inconclusive hunt with no error (nothing supported) still says why, from its summary;
    a verdict stored before summaries existed falls back to its error."""
    from agent.serve.pages import run_page

    why = "no hypothesis was supported; the regression is real but unexplained"
    run = {"id": "r1", "status": "inconclusive", "hypotheses": [], "job": None, "error": None}
    page = run_page(run | {"verdict": {"status": "inconclusive", "summary": why, "root_cause": None}}, None)
    assert f'<p id="error">{why}</p>' in page
    old = run_page(run | {"verdict": {"status": "inconclusive", "root_cause": None, "error": "budget"}}, None)
    assert '<p id="error">budget</p>' in old


def test_a_misspelt_key_or_a_launch_without_its_port_is_refused_when_targets_toml_is_read(tmp_path):
    """`tokn`, `good_reff`, `lower_is_beter` were silently nothing (the service then had no token,
    the target no good ref); a launch with a fixed port waited out its launch timeout per state."""
    from agent.serve.config import ConfigError

    base = 'token = "t"\n[[targets]]\nname = "n"\nmatch = { host = "h" }\nrepo = "/srv/r"\n'
    for text, said in (
        (base.replace("token", "tokn"), "tokn"),
        (base + 'good_reff = "v1"\n', "good_reff"),
        (base + "lower_is_beter = true\n", "lower_is_beter"),
        (base + 'launch = "serve --port 30000"\n', "launch: 'serve --port 30000' has no {port}"),
        (base + 'launch = "serve --port {prot}"\n', "launch: '{prot}' is not a placeholder sleuth fills"),
    ):
        (tmp_path / "t.toml").write_text(text)
        with pytest.raises(ConfigError, match=re.escape(said)):
            load_config(tmp_path / "t.toml")


def test_an_imported_sessions_page_lists_what_its_agent_did_each_call_with_its_result(service):
    """A trial's page of an imported Claude Code session showed 4 of its 28 events: no tool call."""
    fixture = (
        Path(__file__).parent
        / "fixtures"
        / "transcripts"
        / "claude-code"
        / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    )
    run_id = json.loads(sleuth_in_process("import", str(fixture), "--db", str(service.db), "--json").stdout)["run_id"]
    data = httpx.get(f"{service.url}/runs/{run_id}").json()
    calls = [e for e in data["latest"] if e["kind"] == "tool_call"]
    assert len(calls) == 12 and all(" -> " in e["text"] for e in calls), calls  # each answered, on its row
    assert not [e for e in data["latest"] if e["kind"] == "tool_result"]  # results sit beside their calls
    page = httpx.get(f"{service.url}/runs/{run_id}", headers={"Accept": "text/html"}).text
    assert page.count("<td>tool_call</td>") == 12 and "ERROR: " in page
