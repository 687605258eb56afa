"""Where an evaluation's scenario runs execute: worker processes on this machine, or Ray tasks.

Both hand back, per job, the plain dict ``runner.run_job`` returns (the run's events, measurements,
hypotheses, verdict, the truth for the scorer); only the driver writes the SQLite store, so the
store never crosses the wire and results are identical in kind whichever backend ran them.

What a Ray task receives: the ``Job`` (``job.shipped``: the spec's *text* and, for a real case,
the files of its folder - its git bundle and benchmark script - so no shared disk is needed; the
policy settings; the LLM API key only through the worker's own environment). The worker builds the
scenario from the spec, hunts it and reads the truth back for the scorer; the hunt itself is given
the alert and the repository only - never the spec or truth.json - exactly as with local workers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from evals.job import Job, run_job, shipped

DEFAULT_RESOURCE = "sleuth-lab"  # the kind of host a lab scenario needs: any CPU box with python3 and git


def _died(job: Job, exc: BaseException) -> dict:
    return {"job": job.model_dump(), "scenario": Path(job.spec).stem, "error": f"worker died: {exc}"}


# A local worker's state: is it hunting, and has the driver stopped it (``LocalBackend``)?
_running = False
_stopping = False


def _stop_worker(signum, _frame) -> None:
    """SIGTERM from the driver: a KeyboardInterrupt in the hunt under way, once, and no job starts
    after it. The hunt unwinds as on Ctrl-C: a benchmark command under way is killed (its process
    group), its servers stopped and its worktrees removed."""
    global _stopping
    if _stopping:
        return  # its cleanup is not cut short by a second signal
    _stopping = True
    if _running:
        raise KeyboardInterrupt(f"signal {signum}")


def _worker_init() -> None:
    # Ctrl-C reaches the whole process group: the driver decides, and stops each worker itself.
    # (A handler, not SIG_IGN: what a hunt starts gets the default back on exec.)
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGTERM, _stop_worker)


def _run_job_in_worker(job: Job) -> dict:
    global _running
    if _stopping:  # the evaluation was interrupted: a job already queued to this worker does not start
        return _died(job, "stopped")
    _running = True
    try:
        return run_job(job)
    finally:
        _running = False


STOP_WAIT_S = 120.0  # a worker's hunt unwinds in seconds (a benchmark killed, servers, worktrees)


def _stop_workers(workers: list) -> None:
    """SIGTERM each worker, and again every half second until it has gone (``STOP_WAIT_S`` at
    most; then SIGKILL). Once is not enough: a worker whose main thread still has the terminal's
    SIGINT pending gets the SIGTERM on one of its other threads (the kernel hands a process's
    signal to a thread with none pending), which sets Python's flag without waking the main thread
    from its wait (a benchmark's run: minutes, or for ever). The next one wakes it; the handler
    acts on the first only (``_stop_worker``)."""
    deadline = time.monotonic() + STOP_WAIT_S
    while workers := [p for p in workers if p.is_alive()]:
        sig = signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL
        for proc in workers:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, sig)
        time.sleep(0.5)


class LocalBackend:
    """``workers`` processes on this machine (``ProcessPoolExecutor``). Stopped (Ctrl-C in the
    driver), no job starts and each worker's hunt is interrupted; the driver waits for them on exit."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def results(self, jobs: list[Job]) -> Iterator[tuple[Job, dict]]:
        if not jobs:
            return
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), initializer=_worker_init)
        try:
            futures = {pool.submit(_run_job_in_worker, j): j for j in jobs}
            for fut in as_completed(futures):
                job = futures[fut]
                try:
                    yield job, fut.result()
                except Exception as exc:  # the worker process itself died
                    yield job, _died(job, exc)
        except BaseException:  # Ctrl-C, or the consumer stopped: nothing more starts
            # The workers, taken before the shutdown: it forgets them (``_processes = None``), and
            # none was ever told to stop; the interrupted evaluation then waited, after its
            # "interrupted" line, for every hunt under way to end (minutes a sample, for ever held).
            workers = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            _stop_workers(workers)
            raise
        pool.shutdown(wait=True)


def run_job_on_ray(job: Job) -> dict:
    """``run_job`` in a Ray worker, in the environment a local worker would have: Ray sets
    ``OMP_NUM_THREADS`` (to the task's CPUs) and ``RAY_*`` variables in its workers, and a hunt
    would see them in the server's environment - the methodical policy then suspects
    ``OMP_NUM_THREADS=1`` and spends probes on it. (A node whose servers need the variable sets it
    in the launch command, where the hunt sees it anyway.)"""
    import os

    for key in [k for k in os.environ if k.startswith("RAY_") or k == "OMP_NUM_THREADS"]:
        del os.environ[key]
    return run_job(job)


class RayError(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


class RayBackend:
    """One Ray task per scenario run: ``num_cpus`` CPUs and one unit of ``resource`` (a custom
    resource the nodes that can run lab scenarios declare, e.g. ``ray start --resources
    '{"sleuth-lab": 4}'``). Without ``address`` a local Ray head is started on 127.0.0.1 with the
    dashboard off, declaring ``resource`` as many times as it has CPUs."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        resource: str = DEFAULT_RESOURCE,
        num_cpus: float = 1.0,
        local_cpus: int = 2,
        local_resources: dict[str, float] | None = None,
    ) -> None:
        self.address, self.resource, self.num_cpus, self.local_cpus = address, resource, num_cpus, local_cpus
        self.local_resources = local_resources or {}  # more custom resources the local head offers

    def _init(self):
        try:
            import ray
        except ImportError as exc:
            raise RayError("Ray is not installed: pip install 'perf-sleuth[ray]'") from exc
        if ray.is_initialized():
            return ray
        try:
            if self.address:
                ray.init(address=self.address, logging_level="WARNING", log_to_driver=False)
            else:
                ray.init(
                    num_cpus=self.local_cpus,
                    resources={self.resource: self.local_cpus, **self.local_resources},
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    logging_level="WARNING",
                    log_to_driver=False,
                )
        except Exception as exc:  # ConnectionError, RuntimeError... Ray's own words, in one line
            raise RayError(f"cannot start or reach Ray at {self.address or 'a local head'}: {exc}") from exc
        return ray

    def results(self, jobs: list[Job]) -> Iterator[tuple[Job, dict]]:
        if not jobs:
            return
        ray = self._init()
        task = ray.remote(run_job_on_ray).options(num_cpus=self.num_cpus, resources={self.resource: 1}, max_retries=0)
        pending = {task.remote(shipped(j)): j for j in jobs}  # its spec and case files travel with it
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            job = pending.pop(ref)
            try:
                yield job, ray.get(ref)
            except Exception as exc:  # the task or its worker died
                yield job, _died(job, exc)

    def shutdown(self) -> None:
        try:
            import ray
        except ImportError:
            return
        if ray.is_initialized() and not self.address:
            ray.shutdown()
