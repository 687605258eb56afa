"""The service's work queue: alerts become hunt jobs, approvals become apply jobs; every job is a
``sleuth`` process of its own, at most ``concurrency`` at a time.

Everything is in the run store (tables ``serve_alerts`` and ``serve_jobs``), so a restarted
service picks up where the last one stopped: queued jobs run; a job that was running when the
service died is continued - a hunt whose run reached a checkpoint with ``sleuth resume``, one that
never started from the beginning, an approval whose run still waits for it again. Runs paused
at the approval interrupt need nothing: they are in the store and the page shows them.

A job is a process, not a thread, so a hunt that crashes cannot take the service with it, and
stopping the service stops (SIGTERM) the hunts it started; their servers and worktrees are
cleaned up the way ``sleuth hunt`` always does on SIGTERM. A service that dies without stopping
(SIGKILL, OOM) takes its hunts with it too: each job asks the kernel for a SIGTERM when the
service goes (``PR_SET_PDEATHSIG``), unless ``leave_hunts_running`` is set.

One driver per run (``transcripts.lease``): a restarted service adopts a job whose run is still
driven by a live process (it watches it and continues the run only once that driver is gone),
and a job it does start that finds its run driven exits 2 without touching it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from agent.serve.config import ServeConfig, ServeTarget
from agent.serve.payloads import Alert
from agent.state import new_run_id
from transcripts.lease import is_driven
from transcripts.store import Store, layout

ACTIVE = ("queued", "starting", "running", "adopted")  # a job that is not over yet
# What the service does, a line each (an alert and what came of it, each job's course): on stderr
# when `sleuth serve` runs (``serve_cmd``); its output had held only its banner (trial 15).
log = logging.getLogger("sleuth.serve")


DIE_WITH_PARENT = "SLEUTH_DIE_WITH_PARENT"  # set to the parent's pid: SIGTERM when it dies (agent.cli)


def sleuth_command() -> list[str]:
    """How to start ``sleuth`` in a child process: this interpreter, this package."""
    return [sys.executable, "-c", "from agent.cli import main; main()"]


JOB_GRACE_S = 120.0  # past a job's wall budget: time to stop its servers and remove its worktrees
STORE_RETRY_S = 60.0  # a run stopped by its store: tried again after this, then 4x and 16x later
STORE_RETRIES = 3


class HuntQueue:
    def __init__(
        self,
        config: ServeConfig,
        db: Path,
        command: list[str] | None = None,
        grace_s: float = JOB_GRACE_S,
        store_retry_s: float = STORE_RETRY_S,
    ) -> None:
        self.config, self.db = config, db
        self.command = command or sleuth_command()
        self.grace_s, self.store_retry_s = grace_s, store_retry_s
        self.store = Store(db)
        self.work = layout(db).serve
        self.work.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.intake = threading.Lock()  # alerts are taken one at a time (``take``)
        self.wake = threading.Condition()
        self.stopping = False
        self.procs: dict[str, subprocess.Popen] = {}
        self.cancelled: set[str] = set()  # jobs a person cancelled (``cancel``)
        self.threads: list[threading.Thread] = []
        self._recover()

    # -- the tables ------------------------------------------------------------------------------
    def _jobs(self, where: str = "1", args: list | None = None) -> list[dict]:
        if "serve_jobs" not in self.store.db.table_names():
            return []
        with self.lock:
            return list(self.store.db["serve_jobs"].rows_where(where, args or [], order_by="created"))

    def _put_job(self, **row) -> dict:
        row = {"id": uuid.uuid4().hex[:12], "created": time.time(), "status": "queued", **row}
        with self.lock, self.store.transaction() as db:
            db["serve_jobs"].insert(row, pk="id", alter=True)
        log.info("job %s %s %s: queued", row["id"], row["kind"], row.get("run_id"))
        with self.wake:
            self.wake.notify_all()
        return row

    def _update_job(self, job_id: str, **fields) -> None:
        with self.lock, self.store.transaction() as db:
            db["serve_jobs"].update(job_id, fields, alter=True)
            job = db["serve_jobs"].get(job_id) if "status" in fields else None
        if job is not None:  # every job's course, in the service's own output
            said = [f"pid {fields['pid']}"] if fields.get("pid") else []
            said += [f"exit {fields['exit_code']}"] if fields.get("exit_code") is not None else []
            said += [str(fields["error"])[:300]] if fields.get("error") else []
            extra = f" ({'; '.join(said)})" if said else ""
            log.info("job %s %s %s: %s%s", job_id, job["kind"], job.get("run_id"), fields["status"], extra)

    def targets_of_runs(self) -> dict[str, str]:
        """The target (its name in the config) each run this service hunted was hunted as."""
        return {j["run_id"]: j["target"] for j in self._jobs("kind = 'hunt'")}

    def job_for_run(self, run_id: str) -> dict | None:
        jobs = self._jobs("run_id = ?", [run_id])
        return jobs[-1] if jobs else None

    def runs_without_row(self) -> list[dict]:
        """Hunt jobs whose run has no row in the store: waiting for a free slot, starting, or failed
        before the hunt began (bad input: the on-call needs to see that too)."""
        known = {r["id"] for r in self.store.runs(limit=100000)}
        latest: dict[str, dict] = {}
        for j in self._jobs("kind = 'hunt' and status != 'interrupted'"):
            latest[j["run_id"]] = j
        return [j for j in latest.values() if j["run_id"] not in known]

    def _awaiting(self, fingerprint: str) -> str | None:
        """The run of this alert's last hunt, where it still waits for a person's decision, else
        None. Alertmanager sends a firing alert again every ``repeat_interval``: each repeat had
        started a whole new hunt of the same regression (an hour of a node's time), and a trial's
        seed repository held six runs awaiting approval for one culprit."""
        hunts = self._jobs("kind = 'hunt' and fingerprint = ?", [fingerprint])
        run = self.store.run(hunts[-1]["run_id"]) if hunts else None
        return run["id"] if run is not None and run.get("status") == "awaiting_approval" else None

    # -- alerts in ---------------------------------------------------------------------------------
    def take(self, alert: Alert, source: str) -> dict:
        """Record an alert and act on it: a firing one starts a hunt (or joins the hunt already
        running for the same fingerprint); a resolved one is recorded. Returns what happened.
        One alert at a time: the web server answers requests on a pool of threads, and two
        repeats of one fingerprint arriving together must not both find no hunt and start two."""
        with self.intake:
            return self._take(alert, source)

    def _take(self, alert: Alert, source: str) -> dict:
        fp = alert.key()
        target = self.config.target_for(alert.labels)
        row = {
            "fingerprint": fp,
            "status": alert.status,
            "received": time.time(),
            "source": source,
            "labels": json.dumps(alert.labels),
            "annotations": json.dumps(alert.annotations),
            "target": target.name if target else None,
        }
        out: dict = {"fingerprint": fp, "status": alert.status, "target": row["target"], "run_id": None}
        if alert.status == "resolved":
            # Recorded beside the hunt its firing started, where there is one (it said run_id null,
            # and nothing tied the resolution to the hunt still queued or running for it).
            hunts = self._jobs("kind in ('hunt', 'resume') and fingerprint = ?", [fp])
            out["action"], out["run_id"] = "recorded", hunts[-1]["run_id"] if hunts else None
        elif target is None:
            out["action"] = "unmatched"
        else:
            # A hunt, or its resumption after a restart: either way the run that alert is being hunted in.
            active = self._jobs(f"kind in ('hunt', 'resume') and fingerprint = ? and status in {ACTIVE}", [fp])
            labels, annotations = target.complete(alert.labels, alert.annotations)
            if active:
                out["action"], out["run_id"] = "joined", active[-1]["run_id"]
            elif waiting := self._awaiting(fp):  # hunted already, a person yet to decide: the same regression
                out["action"], out["run_id"] = "joined", waiting
            elif "launch_command" not in annotations:
                # Nothing to launch: said now, not by a hunt job that fails later naming a file.
                out["action"] = "refused"
                out["error"] = (
                    f"target '{target.name}' names no `launch` and the alert no annotations.launch_command: "
                    "give the target a launch"
                )
            else:
                run_id = new_run_id()
                alert_file = self.work / f"alert-{run_id}.json"
                full = alert.model_copy(update={"labels": labels, "annotations": annotations})
                alert_file.write_text(json.dumps(full.model_dump(), indent=2))
                self._put_job(kind="hunt", run_id=run_id, fingerprint=fp, target=target.name, alert=str(alert_file))
                out["action"], out["run_id"] = "queued", run_id
        row["action"], row["run_id"] = out["action"], out["run_id"]
        log.info(
            "alert %s %s (%s): %s%s%s", fp, alert.status, source, out["action"],
            f" {out['run_id']} on target {row['target']}" if out["run_id"] else "",
            f": {out['error']}" if out.get("error") else "",
        )  # fmt: skip
        with self.lock, self.store.transaction() as db:
            db["serve_alerts"].insert(row, alter=True)
        return out

    def decide(self, run_id: str, approved: bool, reason: str, branch: str | None = None) -> dict:
        """Queue the approval (or rejection) of a run awaiting it; the job resumes the graph. Two
        clicks at once get the one job (taken under the intake lock, like alerts)."""
        with self.intake:
            pending = self._jobs(f"run_id = ? and kind in ('approve', 'reject') and status in {ACTIVE}", [run_id])
            if pending:
                return pending[-1]
            return self._put_job(kind="approve" if approved else "reject", run_id=run_id, reason=reason, branch=branch)

    def cancel(self, run_id: str) -> dict | None:
        """Cancel the run's hunt (or its resumption) that is queued or running: a queued one never
        starts; a running one is sent SIGTERM and stops as ``sleuth hunt`` does on it (servers
        stopped, worktrees removed, the run ``interrupted``: ``sleuth resume`` still continues
        it). The job says ``cancelled``. None: no such job (a decision's job is not cancelled: it
        may have landed a branch already)."""
        with self.intake:
            active = self._jobs(f"run_id = ? and kind in ('hunt', 'resume') and status in {ACTIVE}", [run_id])
            if not active or active[-1]["status"] == "adopted":  # not this service's process
                return None
            job = active[-1]
            self.cancelled.add(job["id"])
            if job["status"] == "queued":
                self._update_job(job["id"], status="cancelled", ended=time.time())
            elif (proc := self.procs.get(job["id"])) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)  # ``_run`` records the end once it has gone
        return self._jobs("id = ?", [job["id"]])[0]

    # -- running jobs ------------------------------------------------------------------------------
    def argv(self, job: dict) -> list[str]:
        db = ["--db", str(self.db), "--json"]
        if job["kind"] == "approve":
            branch = ["--branch", job["branch"]] if job.get("branch") else []
            return [*self.command, "approve", job["run_id"], "--reason", job.get("reason") or "approved", *branch, *db]
        if job["kind"] == "reject":
            return [*self.command, "reject", job["run_id"], "--reason", job.get("reason") or "rejected", *db]
        if job["kind"] == "resume":
            return [*self.command, "resume", job["run_id"], *db]
        t = next((x for x in self.config.targets if x.name == job["target"]), None)
        if t is None:
            raise RuntimeError(f"target '{job['target']}' is no longer in the config")
        return [*self.command, "hunt", "--alert", job["alert"], "--run-id", job["run_id"], *_target_args(t), *db]

    def _run(self, job: dict) -> None:
        log = self.work / f"job-{job['id']}.log"
        try:
            argv = self.argv(job)
        except RuntimeError as exc:
            self._update_job(job["id"], status="failed", ended=time.time(), error=str(exc))
            return
        env = None if self.config.leave_hunts_running else {**os.environ, DIE_WITH_PARENT: str(os.getpid())}
        with self.intake:  # a cancel either finds the job not yet started or finds its process
            if job["id"] in self.cancelled:
                self._update_job(job["id"], status="cancelled", ended=time.time())
                return
            with open(log, "w") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
            self.procs[job["id"]] = proc
        self._update_job(job["id"], status="running", started=time.time(), pid=proc.pid, log=str(log))
        budget = self.wall_budget(job)
        try:
            rc = proc.wait(timeout=budget + self.grace_s)
        except subprocess.TimeoutExpired:  # it holds a slot (and a host's GPUs) far past its budget
            _terminate(proc, wait_s=min(30.0, self.grace_s))
            self.procs.pop(job["id"], None)
            self._update_job(job["id"], status="failed", ended=time.time(), exit_code=proc.returncode,
                             error=self._overran(job, budget, f"stopped (pid {proc.pid})"))  # fmt: skip
            return
        self.procs.pop(job["id"], None)
        if job["id"] in self.cancelled:  # a person stopped it: not continued, not retried
            self._update_job(job["id"], status="cancelled", ended=time.time(), exit_code=rc)
            return
        if self.stopping:  # stopped with the service: done if its run got to its end, else interrupted
            self._settle(job, rc)  # with what continues it queued for the next start
            return
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        if rc in (0, 1) and self._unfinished(job, rc):  # the store went away under it (a full disk, a lock)
            self._retry(job, rc, tail[0][:500] if tail else f"exit {rc}")
            return
        self._update_job(
            job["id"],
            status="done" if rc in (0, 1) else "failed",  # 1: the hunt ran and was inconclusive
            ended=time.time(),
            exit_code=rc,
            error=None if rc in (0, 1) else (tail[0][:500] if tail else f"exit {rc}"),
        )

    def _unfinished(self, job: dict, rc: int) -> bool:
        """Did a hunt's process end (0 or 1) without ending its run? Only a store it could not
        write does that (``hunt_cmd.store_guard``): the run stopped at its last checkpoint, its row
        ``failed`` with a "store: ..." error where that could still be written, else still
        ``running`` with no driver; or, stopped before its first row (exit 1), it has no row at all."""
        if job["kind"] not in ("hunt", "resume"):
            return False
        run = self.store.run(job["run_id"])
        if run is None:
            return job["kind"] == "hunt" and rc == 1
        stopped = run["status"] == "running" or (
            run["status"] == "failed" and str(run.get("error") or "").startswith("store: ")
        )
        return stopped and not is_driven(layout(self.db).runs / job["run_id"])

    def _retry(self, job: dict, rc: int, why: str) -> None:
        """Continue such a run later, when the disk may have room again: ``store_retry_s``, then
        four times that, then sixteen times; after three tries the job fails with the reason."""
        tries = sum(1 for j in self._jobs("run_id = ?", [job["run_id"]]) if j.get("retry_of"))
        if tries >= STORE_RETRIES:
            self._update_job(job["id"], status="failed", ended=time.time(), exit_code=rc,
                             error=f"{why} (gave up after {tries} tries)")  # fmt: skip
            return
        self._update_job(job["id"], status="interrupted", ended=time.time(), exit_code=rc, error=why)
        kind = "resume" if self.store.run(job["run_id"]) is not None else "hunt"
        again = {k: job.get(k) for k in ("fingerprint", "target", "alert")}
        self._put_job(kind=kind, run_id=job["run_id"], retry_of=job["id"],
                      not_before=time.time() + self.store_retry_s * 4**tries, **again)  # fmt: skip

    def wall_budget(self, job: dict) -> float:
        """The wall-time budget of a job's process: its target's (a hunt, and its resumption); an
        approval's re-measurement gets a budget of its own, the largest of the targets'."""
        t = next((x for x in self.config.targets if x.name == job.get("target")), None)
        if t is not None:
            return t.budget.max_wall_s
        return max((x.budget.max_wall_s for x in self.config.targets), default=1800.0)

    def _overran(self, job: dict, budget: float, what: str) -> str:
        return (
            f"{what}: ran past its wall budget ({budget:.0f} s) and {self.grace_s:.0f} s to clean up; "
            f"`sleuth resume {job['run_id']}` continues the run once the cause is found"
        )

    def _next(self) -> dict | None:
        """The oldest queued job that may start now (a retry waits for its ``not_before``)."""
        now = time.time()
        with self.lock, self.store.transaction():  # taken and marked in one write: no other worker takes it
            queued = (
                self.store.db["serve_jobs"].rows_where("status = 'queued'", order_by="created")
                if "serve_jobs" in self.store.db.table_names()
                else []
            )
            row = next((r for r in queued if (r.get("not_before") or 0) <= now), None)
            if row is not None:
                self.store.db["serve_jobs"].update(row["id"], {"status": "starting"})
        return row

    def _worker(self) -> None:
        while not self.stopping:
            job = self._next()
            if job is None:
                with self.wake:
                    self.wake.wait(timeout=1.0)
                continue
            self._run(job)

    def start(self) -> None:
        for i in range(self.config.concurrency):
            t = threading.Thread(target=self._worker, name=f"sleuth-serve-{i}", daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        """Stop taking jobs and SIGTERM the running ones (they stop their servers on the way out)."""
        self.stopping = True
        with self.wake:
            self.wake.notify_all()
        procs = list(self.procs.values())
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            _reap(proc)  # all told at once: each stops its servers in parallel
        for t in self.threads:  # each records how its job ended before the store closes
            t.join(timeout=30)
        self.store.close()

    # -- a restart ---------------------------------------------------------------------------------
    def _recover(self) -> None:
        """Jobs the last service left running (or starting) are continued; one whose run a live
        process still drives (a hunt left running) is adopted instead: watched until it ends."""
        for job in self._jobs("status in ('running', 'starting', 'adopted')"):
            if is_driven(layout(self.db).runs / job["run_id"]):
                self._update_job(job["id"], status="adopted")
                t = threading.Thread(target=self._watch, args=(job,), name=f"sleuth-adopt-{job['id']}", daemon=True)
                t.start()
                self.threads.append(t)
                continue
            self._continue(job)

    def _watch(self, job: dict) -> None:
        """An adopted job: wait (polling the run's lease) until its driver is gone, then treat it
        as a job the last service left behind: done if its run ended, continued otherwise."""
        run_dir = layout(self.db).runs / job["run_id"]
        budget = self.wall_budget(job)
        deadline = (job.get("started") or time.time()) + budget + self.grace_s
        while not self.stopping and is_driven(run_dir):
            if time.time() > deadline:  # not this service's process to kill: said, and not continued
                what = f"its driver (pid {job.get('pid')}) still runs" if job.get("pid") else "its driver still runs"
                self._update_job(job["id"], status="failed", ended=time.time(), error=self._overran(job, budget, what))
                return
            with self.wake:
                self.wake.wait(timeout=1.0)
        if self.stopping:
            return
        self._settle(job)

    def _settle(self, job: dict, rc: int | None = None) -> None:
        """A job whose process is gone (stopped with the service, or an adopted one whose driver
        ended): done if its run got where the job takes it, else continued. Its row said
        ``running`` after a clean stop until the next start."""
        run = self.store.run(job["run_id"])
        unfinished = ("running", "interrupted") if job["kind"] in ("hunt", "resume") else WAITING_DECISION
        if run is not None and run["status"] not in unfinished:
            self._update_job(job["id"], status="done", ended=time.time(), exit_code=rc)
            return
        self._continue(job, rc)

    def _continue(self, job: dict, rc: int | None = None) -> None:
        """A job whose process is gone without an ending: mark it and queue what continues it."""
        run = self.store.run(job["run_id"])
        self._update_job(job["id"], status="interrupted", ended=time.time(), exit_code=rc)
        if job["kind"] == "hunt" and run is None:
            self._put_job(kind="hunt", run_id=job["run_id"], fingerprint=job["fingerprint"],
                          target=job["target"], alert=job["alert"])  # fmt: skip
        elif job["kind"] in ("hunt", "resume") and run is not None and run["status"] in ("running", "interrupted"):
            self._put_job(kind="resume", run_id=job["run_id"], fingerprint=job.get("fingerprint"))
        elif job["kind"] in ("approve", "reject") and run is not None and run["status"] in WAITING_DECISION:
            self._put_job(kind=job["kind"], run_id=job["run_id"], reason=job.get("reason"), branch=job.get("branch"))


# A decision job's run still to finish: not decided yet, or decided by a job that stopped after its
# approval was recorded (``hunt_cmd._mark_interrupted``); the same job again finishes either.
WAITING_DECISION = ("awaiting_approval", "interrupted")


def _terminate(proc: subprocess.Popen, wait_s: float = 30.0) -> None:
    """SIGTERM a job's process group (a hunt stops its servers and removes its worktrees on it),
    then SIGKILL what is left after ``wait_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    _reap(proc, wait_s)


def _reap(proc: subprocess.Popen, wait_s: float = 30.0) -> None:
    """Wait for a job's process that was sent SIGTERM; SIGKILL its group after ``wait_s``."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the kernel: not the worker's end
            proc.wait(timeout=wait_s)


def _target_args(t: ServeTarget) -> list[str]:
    args = ["--repo", t.repo, "--policy", t.policy]
    for flag, value in (
        ("--host", t.host),
        ("--ssh-config", t.ssh_config),
        ("--known-hosts", t.known_hosts),
        ("--model", t.model),
        ("--base-url", t.base_url),
    ):
        if value:
            args += [flag, value]
    b = t.budget
    args += ["--max-probes", str(b.max_probes), "--max-wall", str(b.max_wall_s), "--samples", str(b.samples)]
    return args
