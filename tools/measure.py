"""Measure repository states on a Host: samples, summaries, A/B comparisons, a cache, the cost.

A *state* is a commit (or a snapshot commit of uncommitted work) plus a launch configuration
(command template and env). Measuring it checks the commit out in a scratch worktree, runs the
per-probe setup (a build), launches the server, runs the workload and takes samples. Results are
cached by (tree hash, launch config, workload): the same state is never measured twice in a run,
and a later request for more samples only takes the missing ones.

A host has *slots*: how many servers it can hold at once (a TP-8 server takes all eight GPUs of a
node: one slot). The measurer never runs more servers than that. The last servers it launched
stay up (at most ``slots`` of them) so a top-up of the same state costs no launch; a new state
evicts the least recently used one.

A/B comparisons (``compare_states``, ``measure_pair``):
- with two slots or more, A B A B on two warm servers, so machine drift hits both sides alike;
- on one slot, *launches* sit in a balanced order (A B A for a small A/B, A B B A A B ... for a
  larger one), several samples per launch, the number per launch chosen from the measured cost
  of a launch and of a sample; the statistics treat the samples of one launch as correlated
  (``tools.stats.compare_launches``).

Every wait is bounded: the launch by ``launch_timeout_s``, each request by a timeout derived from
the samples seen so far, the whole measurement by ``deadline`` (a wall-clock time: the hunt's
budget). At the deadline the probe stops (server group killed, worktree removed) and ``Deadline``
is raised. A state whose server dies at start, crashes on a request or stops answering raises
``BrokenState`` (with the log's last error), a failing setup ``Unbuildable``, a benchmark command
that exits non-zero or prints no number ``CommandFailed``: all are ``ProbeError``s, so a bisection
skips them and the hunt reports them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import statistics
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path

from pydantic import BaseModel, Field

from tools import ports
from tools.bench import BenchConfig, run_bench
from tools.bisect import ProbeError
from tools.codepath import COMMAND_TRACE_ENV, TRACE_ENV, ImportTraces, imported_modules
from tools.files import write_json_atomic
from tools.git import CliGit
from tools.host import Host, HostError
from tools.metric import MetricError, MetricSpec
from tools.server import Server, ServerError, launch, reap
from tools.serverlog import first_failure
from tools.stats import Comparison, Summary, compare_launches, split_launches, summarize
from tools.text import first_line, seconds

# What a launch that finds the GPUs taken prints (SGLang, vLLM, the lab): not the state's fault.
_NO_CAPACITY = re.compile(r"occupied by other processes|Free memory on device|Not enough memory|out of memory", re.I)
NOT_HEALTHY = "does not become healthy within"  # a launch that waited out its timeout (BrokenState.how)
_IMPORT_TRACE = re.compile(r"^import time:\s")  # PYTHONPROFILEIMPORTTIME's lines (tools.codepath)


class Deadline(RuntimeError):
    """The wall-clock budget ran out while measuring; the probe was stopped and cleaned up."""


class StateFailure(ProbeError):
    """A state that cannot be measured for a reason of its own (not the host's, not the budget's):
    which state (``label``, ``ref``), ``how`` it failed, the ``failure`` in one line (the first
    error of its log, or its build's output) and the ``log`` path."""

    # It fails the same way again: the measurer keeps it and tries the state no more
    # (``CommandHung``, a run past its timeout, is not: a busy host can stretch a run).
    final = True

    def __init__(self, label: str, ref: str, how: str, failure: str | None, log: str | None = None) -> None:
        self.label, self.ref, self.how, self.failure, self.log = label, ref[:10], how, failure, log
        super().__init__(f"{label} ({ref[:10]}) {how}: {failure or 'no error in the log'}")

    @property
    def said(self) -> str:
        """How it failed, without naming the state (for a sentence that already names it)."""
        return f"{self.how}: {self.failure or 'no error in the log'}"

    def record(self) -> dict:
        """As plain data (what the transcript keeps; ``type(exc)(**record)`` rebuilds it)."""
        return {"label": self.label, "ref": self.ref, "how": self.how, "failure": self.failure, "log": self.log}


class BrokenState(StateFailure):
    """The state does not serve: its server does not start, crashes on a request or stops
    answering. ``failure`` is the log's first error (the traceback's exception and its line)."""


class Unbuildable(StateFailure):
    """The per-probe setup (a build) failed in the state's worktree: skipped, never blamed."""


class CommandFailed(StateFailure):
    """The benchmark command exited non-zero or printed no number in the state's worktree (a
    commit that does not import, a script that changed its output): the state's own failure,
    listed with the states that did not build or serve."""


class CommandHung(CommandFailed):
    """The benchmark command outlasted its timeout (twice, where the timeout was derived): listed
    with the states that did not run, so a bisection's skip is said (a trial's hunt skipped a
    commit whose benchmark hung and the report never named it), but not final: a busy host can
    stretch a run, and a later measurement tries it again."""

    final = False


class HostBusy(ProbeError):
    """The server could not start because the host's GPUs, or every port it was given, are held
    by another process: the host's state, not the launched one's."""


class Workload(BaseModel):
    """What one sample is: a benchmark run against the launched server (endpoint filled per server)
    and the metric it yields, or, for projects that are not servers, ``command``: a shell template
    run in the state's worktree (``{worktree}`` filled) whose output's last number is the sample."""

    bench: BenchConfig | None = None
    metric: str = "tok_per_s"  # with ``command``: a key of the JSON it writes, or "value" (see tools.metric)
    command: str | None = None
    metric_regex: str | None = None  # with ``command``: the number in its plain-text output
    output: str | None = None  # with ``command``: the file it writes, relative to the worktree

    def key(self) -> str:
        bench = (
            self.bench.model_dump(mode="json", exclude={"endpoint", "server_log", "timeout_s", "fail_fast"})
            if self.bench
            else None
        )
        extra = {"regex": self.metric_regex, "output": self.output} if self.metric_regex or self.output else {}
        return json.dumps({"bench": bench, "metric": self.metric, "command": self.command, **extra}, sort_keys=True)

    def reader(self) -> MetricSpec:
        """How a command's sample is read (a server's comes from ``BenchResult.metrics()``)."""
        name = None if self.metric == "value" or self.metric_regex else self.metric
        return MetricSpec(name=name, regex=self.metric_regex, output=self.output)


class State(BaseModel):
    label: str
    ref: str  # a commit SHA (a snapshot commit for uncommitted work)
    launch: str  # command template with {worktree} and {port}
    env: dict[str, str] = {}


class Measurement(BaseModel):
    state: State
    tree: str
    samples: list[float]
    summary: Summary
    verify_ms: list[float] = []
    launches: int
    groups: list[int] = []  # samples per launch, in order


class Cost(BaseModel):
    """What measuring cost: launches, samples, device time (wall time with a server up, or a
    benchmark command running) and build time (the per-probe setup); ``launch_s`` and
    ``sample_s``, the parts of the wall time spent launching (setup to healthy) and sampling,
    say what one launch costs in samples, which sizes an A/B on a one-slot host
    (``Runtime.ab_samples``)."""

    launches: int = Field(0, description="servers started (a benchmark command launches nothing)")
    samples: int = Field(0, description="benchmark samples taken")
    device_s: float = Field(0.0, description="wall seconds with a server up or a benchmark command running")
    build_s: float = Field(0.0, description="seconds in the per-probe setup (a build)")
    launch_s: float = Field(0.0, description="seconds from checkout to healthy, summed over launches")
    sample_s: float = Field(0.0, description="seconds spent sampling")
    busy_wait_s: float = Field(0.0, description="seconds waiting for GPUs another process held (Measurer.busy_wait_s)")

    def minus(self, before: Cost) -> Cost:
        return Cost(
            launches=self.launches - before.launches,
            samples=self.samples - before.samples,
            **{k: round(getattr(self, k) - getattr(before, k), 3) for k in _SECONDS},
        )

    def plus(self, other: Cost | dict) -> Cost:
        o = other if isinstance(other, Cost) else Cost.model_validate(other)
        return Cost(
            launches=self.launches + o.launches,
            samples=self.samples + o.samples,
            **{k: round(getattr(self, k) + getattr(o, k), 3) for k in _SECONDS},
        )

    def waited_said(self) -> str:
        """The report's words for time spent waiting on another process's GPUs (none: nothing)."""
        return f"; {self.busy_wait_s:.0f} s waiting for GPUs another process held" if self.busy_wait_s >= 0.5 else ""

    def launch_in_samples(self) -> float | None:
        """What one launch costs in samples (mean launch time over mean sample time), or None
        before both were measured (recordings from before these times were kept)."""
        if not (self.launches and self.samples and self.launch_s and self.sample_s):
            return None
        return (self.launch_s / self.launches) / (self.sample_s / self.samples)


_SECONDS = ("device_s", "build_s", "launch_s", "sample_s", "busy_wait_s")


def _measurement(state: State, tree: str, entry: dict) -> Measurement:
    return Measurement(
        state=state,
        tree=tree,
        samples=list(entry["samples"]),
        summary=summarize(entry["samples"]),
        verify_ms=list(entry["verify_ms"]),
        launches=entry["launches"],
        groups=list(entry.get("groups", [])),
    )


class MeasureCache:
    """Samples per (tree, launch, env, workload). In memory; ``path`` persists it as JSON."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self.lock = threading.Lock()
        self.data: dict[str, dict] = {}
        if self.path and self.path.is_file():
            try:
                self.data = json.loads(self.path.read_text())
            except ValueError:  # written by a version before saves were atomic: measure again
                self.data = {}

    @staticmethod
    def key(tree: str, state: State, workload: Workload) -> str:
        raw = json.dumps([tree, state.launch, sorted(state.env.items()), workload.key()])
        return hashlib.sha256(raw.encode()).hexdigest()

    def get(self, key: str) -> dict:
        with self.lock:
            return self.data.setdefault(key, {"samples": [], "verify_ms": [], "launches": 0, "groups": []})

    def save(self) -> None:
        """Atomically (a temporary file renamed over the old one): a process killed mid-save leaves
        the previous cache whole, never a truncated file."""
        if self.path:
            with self.lock:
                write_json_atomic(self.path, self.data)


class _Launched:
    """One state made ready to sample: what to close (its worktree, its server), and how to sample."""

    def __init__(
        self,
        stack: ExitStack,
        sample: Callable[[], tuple[float, float | None]],
        ref: str = "",
        server: Server | None = None,
    ):
        self.stack, self.sample, self.ref, self.server = stack, sample, ref, server

    def close(self) -> None:
        self.stack.close()


class Measurer:
    MIN_SAMPLE_TIMEOUT_S = 10.0  # the floor of a derived sample timeout (``sample_timeout``)

    def __init__(
        self,
        host: Host,
        git: CliGit,
        log_dir: str | Path,
        cache: MeasureCache | None = None,
        health_timeout_s: float = 1800.0,
        pid_dir: str | Path | None = None,
        slots: int = 1,
        setup: str | None = None,
        sample_timeout_s: float | None = None,
        trace_imports: bool = False,
        busy_wait_s: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.host = host
        self.git = git
        self.log_dir = Path(log_dir)
        self.cache = cache or MeasureCache()
        self.health_timeout_s = health_timeout_s  # a launch's wait for /health (the launch timeout)
        self.slots = max(1, slots)
        self.setup = setup
        self.sample_timeout_s = sample_timeout_s  # None: derived from the samples seen so far
        self.busy_wait_s = busy_wait_s  # how long a launch waits for GPUs another process holds
        # Told how a long wait goes (GPUs another process holds), a line each try: a terminal or a
        # log that shows nothing for the ten minutes of a busy node reads as a hang.
        self.on_wait = on_wait
        # Launches print the modules they import (tools.codepath), kept per commit: which
        # commits of a range can matter at all.
        self.trace_imports = trace_imports
        self.traces = ImportTraces(self.log_dir.parent / "imports.json")
        self.deadline: float | None = None  # time.time() after which every wait ends (Deadline)
        self.cost = Cost()
        self.broken: dict[str, StateFailure] = {}  # cache key -> why the state did not serve or build
        self._trees: dict[str, str] = {}  # commit sha -> tree sha
        self._warm: OrderedDict[str, _Launched] = OrderedDict()  # at most ``slots``, least recent first
        self._lock = threading.RLock()  # one driver of the host's slots at a time
        self._launch_s: list[float] = []  # wall seconds per launch (setup + start to healthy)
        self._sample_s: list[float] = []  # wall seconds per successful sample
        # What a killed predecessor left behind: its servers (registered in ``pid_dir``, shared by
        # the runs of one store) and its scratch worktrees.
        self.pid_dir = Path(pid_dir) if pid_dir else self.log_dir.parent / "servers"
        reap(self.pid_dir, host)
        git.remove_stale_worktrees()

    # -- bounds ---------------------------------------------------------------------------------
    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time()

    def _bound(self, timeout: float) -> float:
        """``timeout``, cut to what is left of the deadline; raises Deadline when nothing is."""
        left = self.remaining()
        if left is None:
            return timeout
        if left <= 0:
            raise Deadline("the wall-time budget ran out")
        return min(timeout, left)

    def _at_deadline(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0.5

    def busy_poll_s(self) -> float:
        """How often a launch is tried again while the GPUs are held: a tenth of the wait, from
        half a second to a minute (a real launch that fails for memory costs tens of seconds)."""
        return min(60.0, max(0.5, self.busy_wait_s / 10))

    def _wait_for_gpus(self, since: float) -> bool:
        """Sleep until the next try while the wait (from ``since``) lasts; False once it is over.
        The budget ends it too, as a Deadline: waiting is what the budget was spent on."""
        waited = time.monotonic() - since
        if waited >= self.busy_wait_s:
            return False
        pause = min(self.busy_poll_s(), self.busy_wait_s - waited)
        left = self.remaining()
        if left is not None:
            if left <= 1.0:
                raise Deadline(f"the wall-time budget ran out waiting {waited:.0f} s for GPUs another process holds")
            pause = min(pause, left - 1.0)
        if self.on_wait is not None:
            self.on_wait(
                f"waiting for GPUs another process holds: {waited:.0f} s of {self.busy_wait_s:.0f} s, "
                f"next try in {pause:.0f} s"
            )
        time.sleep(pause)
        self.cost = self.cost.plus(Cost(busy_wait_s=pause))
        return True

    def sample_timeout(self, configured: float) -> float:
        """A sample's timeout: the configured one, or, once samples were seen, ten times the slowest
        of them (at least 10 s): a request that takes ten times longer than any before is hung."""
        if self.sample_timeout_s is not None:
            return self.sample_timeout_s
        if not self._sample_s:
            return configured
        return min(configured, max(self.MIN_SAMPLE_TIMEOUT_S, 10 * max(self._sample_s)))

    def _derived_timeout(self) -> bool:
        """Is a sample's timeout this run's own guess (ten times the slowest sample), not a number
        the user gave? Only a guess is stretched once for a busy host; the user's holds."""
        return self.sample_timeout_s is None and bool(self._sample_s)

    # -- one state ready to sample --------------------------------------------------------------
    def _start(self, key: str, state: State, workload: Workload, entry: dict) -> _Launched:
        """Check the state out, build it, launch it; a free slot is made first (never more servers
        than the host has slots). On any failure nothing is left running."""
        known = self.broken.get(key)
        if known is not None:  # a state that did not serve or build once is not tried again in this run
            raise type(known)(state.label, state.ref, known.how, known.failure, known.log)
        while len(self._warm) >= self.slots:
            self._retire(next(iter(self._warm)))
        stack = ExitStack()
        try:
            t0, waited = time.monotonic(), self.cost.busy_wait_s
            wt = stack.enter_context(self.git.worktree(state.ref))
            self._build(key, state, wt)
            if workload.command is None:
                server = self._launch(key, state, wt, stack)
                launched = _Launched(stack, lambda: self._sample(server, workload, state), state.ref, server)
            else:  # its device time is each run's own (``_run_command``), counted as it runs
                launched = _Launched(stack, lambda: self._run_command(wt, workload, state))
            self._warm[key] = launched  # known before anything else can interrupt: closed on the way out
            # What a launch costs, without the time spent waiting for another process's GPUs.
            self._launch_s.append(time.monotonic() - t0 - (self.cost.busy_wait_s - waited))
            self.cost = self.cost.plus(Cost(launch_s=self._launch_s[-1]))
        except BaseException:
            stack.close()
            self._warm.pop(key, None)
            raise
        groups = entry.setdefault("groups", [])
        if sum(groups) < len(entry["samples"]):  # samples cached before launches were counted
            groups.append(len(entry["samples"]) - sum(groups))
        if workload.command is None:
            entry["launches"] += 1
            groups.append(0)
            self.cost = self.cost.plus(Cost(launches=1))
        # A benchmark command launches nothing: each sample is its own process (``_take`` gives it
        # a group of its own, so no launch design effect is assumed) and a checkout is not a launch.
        return launched

    def _sampled(self, seconds: float) -> None:
        self._sample_s.append(seconds)
        self.cost = self.cost.plus(Cost(sample_s=seconds))

    def _add_device(self, seconds: float) -> None:
        self.cost = self.cost.plus(Cost(device_s=seconds))

    def _build(self, key: str, state: State, worktree: str) -> None:
        if not self.setup:
            return
        cmd = self.setup.replace("{worktree}", shlex.quote(worktree))
        t0 = time.monotonic()
        try:
            res = self.host.run(cmd, cwd=worktree, env=state.env or None, timeout=self._bound(self.health_timeout_s))
        finally:
            self.cost = self.cost.plus(Cost(build_s=time.monotonic() - t0))
        if res.timed_out and self._at_deadline():
            raise Deadline("the wall-time budget ran out during the setup")
        if not res.ok:
            why = "timed out" if res.timed_out else f"exit {res.exit_code}"
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
            failure = f"setup `{self.setup}` {why}: {tail[0][:300]}"
            self.broken[key] = Unbuildable(state.label, state.ref, "does not build", failure)
            raise self.broken[key]

    def _launch(self, key: str, state: State, worktree: str, stack: ExitStack) -> Server:
        """Launch the state's server. GPUs held by another process (a neighbour's job, another
        hunt) are waited for, up to ``busy_wait_s`` and never past the deadline, with a launch
        tried again every ``busy_poll_s()``: a busy node is the host's state, not the commit's."""
        busy_since: float | None = None
        while True:
            log = self.log_dir / f"{state.label}-{state.ref[:10]}-{uuid.uuid4().hex[:6]}.log"
            timeout = self._bound(self.health_timeout_s)
            up = time.monotonic()
            try:
                server = launch(
                    state.launch,
                    worktree,
                    log,
                    env={**state.env, **TRACE_ENV} if self.trace_imports else state.env,
                    host=self.host,
                    health_timeout_s=timeout,
                    pid_dir=self.pid_dir,
                )
                break
            except ServerError as exc:
                text = str(exc)
                busy = bool(_NO_CAPACITY.search(text))
                if busy:  # a try refused for the GPUs is part of the wait for them
                    self.cost = self.cost.plus(Cost(busy_wait_s=time.monotonic() - up))
                else:
                    self._add_device(time.monotonic() - up)
                if self._at_deadline():
                    raise Deadline(f"the wall-time budget ran out while {state.label} was starting") from exc
                if busy:
                    busy_since = time.monotonic() if busy_since is None else busy_since
                    if self._wait_for_gpus(busy_since):
                        continue
                    held = time.monotonic() - busy_since
                    said = f"{state.label} ({state.ref[:10]}) cannot start, no free GPU"
                    waited = f" (still held after {held:.0f} s of waiting)" if held >= 1 else ""
                    # The log's line that says so: the whole error opens with the launch command
                    # and its worktree, and its first line ended "log tail:" with nothing after.
                    line = next(x.strip() for x in text.splitlines() if _NO_CAPACITY.search(x))
                    raise HostBusy(f"{said}{waited}: {line[:300]}") from exc
                if exc.clash:
                    said = f"{state.label} ({state.ref[:10]}) cannot start, every port it got was taken"
                    # Its first line is what a report shows: the log's own words and, where the
                    # launch command binds a port of its own, that port (a trial's said "log tail:"
                    # and nothing more; the port it named was taken, not the ones sleuth drew).
                    fixed = ports.fixed_port(state.launch)
                    hint = f"; the launch command binds `{fixed}` itself: use {{port}} there" if fixed else ""
                    line = exc.failure or next((x.strip() for x in text.splitlines() if ports.clashed(x)), "")
                    raise HostBusy(f"{said} (the log: {line[:200]}){hint}\n{text}") from exc
                waited = f"{NOT_HEALTHY} {seconds(timeout)} s"
                how = waited if "not healthy" in text else "does not start"
                # The log's last line, where no error stands out; never a line of the import trace
                # (a launch cut short mid-import showed "import time: 561 | 10883 | email.utils").
                lines = [x.strip() for x in text.splitlines() if x.strip() and not _IMPORT_TRACE.match(x.strip())]
                failure = exc.failure or first_failure(text) or (lines[-1] if len(lines) > 1 else first_line(text))
                self.broken[key] = BrokenState(state.label, state.ref, how, failure, str(log))
                raise self.broken[key] from exc

        def stop() -> None:
            server.stop()
            self._add_device(time.monotonic() - up)
            if self.trace_imports:
                self._keep_trace(state.ref, server)

        stack.callback(stop)
        return server

    def _keep_trace(self, ref: str, server: Server) -> None:
        """The modules the stopped server imported, from its log. A log that cannot be read loses
        the trace (no commit is then pruned), nothing else."""
        with suppress(OSError, HostError):
            self.traces.add(ref, imported_modules(server.log_text()))

    def imports_at(self, ref: str) -> set[str] | None:
        """The modules traced at ``ref`` so far, a server of it that is still up included."""
        if self.trace_imports:
            for launched in list(self._warm.values()):
                if launched.ref == ref and launched.server is not None:
                    self._keep_trace(ref, launched.server)
        return self.traces.get(ref)

    def trace_command(self, ref: str, workload: Workload) -> set[str]:
        """Run the benchmark command once at ``ref`` with imports printed (not a sample: it is
        not timed and its number is not read); the modules it imported, also kept in ``traces``."""
        assert workload.command is not None
        with self._lock, self.git.worktree(ref) as wt:
            self._build(f"trace:{ref}", State(label="trace", ref=ref, launch=""), wt)
            cmd = workload.command.replace("{worktree}", shlex.quote(wt))
            cmd = cmd.replace("{out}", shlex.quote(f"{wt}/.sleuth-trace-{uuid.uuid4().hex[:8]}.json"))
            t0 = time.monotonic()
            res = self.host.run(
                cmd, cwd=wt, env=COMMAND_TRACE_ENV, timeout=self._bound(self.sample_timeout(self.health_timeout_s))
            )
            self._add_device(time.monotonic() - t0)
        if res.timed_out and self._at_deadline():
            raise Deadline("the wall-time budget ran out while tracing the benchmark command")
        modules = imported_modules(res.stderr) | imported_modules(res.stdout)
        self.traces.add(ref, modules)
        return modules

    # -- one sample -----------------------------------------------------------------------------
    def _run_command(self, worktree: str, workload: Workload, state: State) -> tuple[float, float | None]:
        assert workload.command is not None
        cmd = workload.command.replace("{worktree}", shlex.quote(worktree))
        out = f"{worktree}/{workload.output}" if workload.output else None
        if "{out}" in cmd:  # a fresh result file per sample, in the scratch worktree
            out = f"{worktree}/.sleuth-bench-{uuid.uuid4().hex[:8]}.json"
            cmd = cmd.replace("{out}", shlex.quote(out))
        if out is not None:  # sglang appends to its --output-file: start from none
            self.host.run(["rm", "-f", out], timeout=self._bound(30))
        t0 = time.monotonic()
        timeout = self._bound(self.sample_timeout(self.health_timeout_s))
        try:
            res = self.host.run(cmd, cwd=worktree, env=state.env or None, timeout=timeout)
            if res.timed_out and not self._at_deadline() and self._derived_timeout():
                # Ten times the slowest run so far is a hang on a quiet host, but a busy one (a
                # neighbour's build, a cold bytecode cache in a new worktree) can stretch one run
                # that far: once more, with twice the time, before the state is called hanging.
                first, timeout = timeout, self._bound(2 * timeout)
                res = self.host.run(cmd, cwd=worktree, env=state.env or None, timeout=timeout)
                timeout_said = f"timed out twice ({first:.0f} s, then {timeout:.0f} s)"
            else:
                timeout_said = f"timed out ({timeout:.0f} s)"
        finally:
            # Device time as it runs, inside the measurement that asked for it: counted when the
            # state's worktree was retired, a state still open at the end (an LLM run's "now")
            # cost "0.0 s running it" after five samples.
            self._add_device(time.monotonic() - t0)
        if res.timed_out and self._at_deadline():
            raise Deadline("the wall-time budget ran out during a benchmark command")
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
        if res.timed_out:
            raise CommandHung(state.label, state.ref, f"benchmark command {timeout_said}", tail[0][:200] or "no output")
        if not res.ok:
            raise CommandFailed(state.label, state.ref, f"benchmark command exit {res.exit_code}", tail[0][:200])
        try:
            written = None
            if out is not None:
                got = self.host.run(["cat", out], timeout=self._bound(30))
                if not got.ok:
                    raise MetricError(f"the benchmark did not write its output file {workload.output or '{out}'}")
                written = got.stdout
            value = workload.reader().read(res.stdout, written)
        except MetricError as exc:
            raise CommandFailed(state.label, state.ref, "benchmark command", str(exc)) from None
        self._sampled(time.monotonic() - t0)
        return value, None

    def _sample(self, server: Server, workload: Workload, state: State) -> tuple[float, float | None]:
        assert workload.bench is not None
        timeout = self._bound(self.sample_timeout(workload.bench.timeout_s))
        cfg = workload.bench.model_copy(
            update={"endpoint": f"{server.base_url}/v1", "server_log": None, "timeout_s": timeout, "fail_fast": True}
        )
        t0 = time.monotonic()
        res = run_bench(cfg, server=server)
        if res.errors:
            if self._at_deadline():
                raise Deadline(f"the wall-time budget ran out while sampling {state.label}")
            self._broken_on_request(server, state, res.samples[0].error or "", timeout)
        self._sampled(time.monotonic() - t0)
        try:
            value = res.metric(workload.metric)
        except KeyError as exc:
            raise ProbeError(f"sampling {state.label}: {exc.args[0]}") from None
        return float(value), res.verify_ms

    def _broken_on_request(self, server: Server, state: State, error: str, timeout: float) -> None:
        """A request failed: the server crashed (it died, or answers errors) or hangs (timeouts).
        Either way the state is broken; the log says why."""
        timed_out = "Timeout" in error or "timed out" in error.lower()
        time.sleep(0.2)  # a dying server writes its last lines
        text = server.log_text()
        alive = server.alive()
        failure = first_failure(text)
        if timed_out and alive and "stream stayed open" in error:
            how = f"never finishes an answer (its stream stayed open past {timeout:.0f} s)"
        elif timed_out and alive:
            how = f"stops answering (no response within {timeout:.0f} s)"
        else:
            how = "crashes on a request" if not alive or failure else "fails requests"
        raise BrokenState(state.label, state.ref, how, failure or error, server.log_path)

    # -- the cache and the slots ----------------------------------------------------------------
    def samples_of(self, state: State, workload: Workload) -> list[float]:
        """Every sample of ``state`` under ``workload`` this run's cache holds (what a caller
        counts before a measurement, to say what it added when a budget stops it)."""
        return list(self._entry(state, workload)[0]["samples"])

    def _entry(self, state: State, workload: Workload) -> tuple[dict, str]:
        tree = self._trees.get(state.ref)
        if tree is None:  # a commit's tree never changes: one git call per commit, not per lookup
            tree = self._trees[state.ref] = self.git.tree_hash(state.ref)
        return self.cache.get(MeasureCache.key(tree, state, workload)), tree

    def _take(self, state: State, workload: Workload, entry: dict, n: int, fresh: bool, on_sample) -> None:
        """``n`` samples of ``state`` on its warm server (or a new launch; ``fresh``: always new)."""
        if n <= 0:
            return
        key = self._key(state, workload)
        if key in self._warm and fresh:
            self._retire(key)
        if key in self._warm:
            self._warm.move_to_end(key)  # most recent last
            launched = self._warm[key]
        else:
            launched = self._start(key, state, workload, entry)
        try:
            for _ in range(n):
                if self._at_deadline():
                    raise Deadline(f"the wall-time budget ran out while sampling {state.label}")
                value, verify = launched.sample()
                entry["samples"].append(value)
                if workload.command is None:
                    entry["groups"][-1] += 1
                else:
                    entry["groups"].append(1)
                if verify is not None:
                    entry["verify_ms"].append(verify)
                self.cost = self.cost.plus(Cost(samples=1))
                if on_sample:
                    on_sample(state.label, value)
        except BaseException as exc:
            self._retire(key)
            if isinstance(exc, StateFailure) and exc.final and key not in self.broken:
                self.broken[key] = exc
            raise

    def server_groups(self) -> set[int]:
        """The process groups of the servers up now (what nvidia-smi lists of this hunt's own)."""
        with self._lock:
            return {w.server.pid for w in self._warm.values() if w.server is not None}

    def close(self) -> None:
        """Stop every warm server (and remove its worktree). On a host that no longer answers
        there is nothing to stop from here: the state is forgotten, and the next start on that
        host removes what is left (``reclaim``)."""
        with self._lock:
            while self._warm:
                key = next(iter(self._warm))
                try:
                    self._retire(key)
                except HostError:
                    self._warm.pop(key, None)
            # A signal landing while a state was retired cuts its stop short, and the exit stack
            # has already let go of what it was undoing: a server still registered to this process
            # (CI's and a trial's service killed mid-approval or mid-hunt left one holding every
            # GPU) and a worktree of its own (CI: one too many after the killed service's hunt had
            # gone). Then a dead driver's worktree that appeared after this one opened (its process
            # was still leaving when the run was handed over).
            with suppress(HostError):
                reap(self.pid_dir, self.host, own=True)
                self.git.drop_own_worktrees()
                self.git.remove_stale_worktrees()

    def _retire(self, key: str) -> None:
        """Stop a warm state's server and remove its worktree, then forget it: in that order, so a
        signal landing in between leaves it known, and ``close`` on the way out finishes the job
        (closing twice is harmless)."""
        launched = self._warm.get(key)
        if launched is not None:
            launched.close()
            self._warm.pop(key, None)

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def measure(
        self,
        state: State,
        workload: Workload,
        samples: int,
        on_sample: Callable[[str, float], None] | None = None,
        fresh: bool = False,
    ) -> Measurement:
        """At least ``samples`` samples of ``state`` (cached ones count; ``fresh``: ``samples`` new
        ones on a server launched for them, the last ``samples`` of the result)."""
        with self._lock:
            entry, tree = self._entry(state, workload)
            try:
                need = samples if fresh else samples - len(entry["samples"])
                self._take(state, workload, entry, need, fresh, on_sample)
            finally:
                self.cache.save()
            return _measurement(state, tree, entry)

    def samples_per_launch(self, need: int) -> int:
        """How many samples one launch should give on a one-slot host, from the measured costs:
        the classic optimum for two-stage sampling, sqrt(launch cost / sample cost x within-launch
        variance / between-launch variance), with a prior of ten samples per launch and a
        launch-to-launch spread a third of the sample noise until measured; at most half of what
        a side needs, so a larger A/B gives each side two launches (a balanced A B B A), and at least three, so
        that every launch also tells the within-launch noise apart from the launch-to-launch spread
        (below three the optimum only happens where a launch is as cheap as a sample: not on a GPU
        node, only in a lab run at a few percent of its launch time)."""
        ratio = 10.0
        if self._launch_s and self._sample_s:
            ratio = statistics.median(self._launch_s) / max(1e-6, statistics.median(self._sample_s))
        variance_ratio = self._variance_ratio()
        best = math.sqrt(max(ratio, 0.0) * variance_ratio)
        return max(1, min(math.ceil(need / 2), max(3, round(best))))

    def _variance_ratio(self) -> float:
        """Within-launch over between-launch variance, from every cached state with two launches
        or more of two samples or more (9.0 until there are such states)."""
        within, between = [], []
        for e in list(self.cache.data.values()):
            launches = [g for g in split_launches(e["samples"], e.get("groups", [])) if len(g) >= 2]
            if len(launches) < 2:
                continue
            within.append(statistics.mean(statistics.variance(g) for g in launches))
            between.append(statistics.variance([statistics.mean(g) for g in launches]))
        if not within:
            return 9.0
        w, b = statistics.mean(within), statistics.mean(between)
        return min(100.0, max(1.0, w / b if b > 0 else 100.0))

    def compare_states(
        self,
        a: State,
        b: State,
        workload: Workload,
        samples: int = 7,
        max_samples: int = 56,
        alpha: float = 0.01,
        min_effect_pct: float | None = None,
        fresh: bool = False,
        on_sample: Callable[[str, float], None] | None = None,
    ) -> tuple[Comparison, Measurement, Measurement]:
        """A/B (interleaved on two slots, balanced launches on one; ``fresh``: on newly launched
        servers), doubling the samples while the verdict is ``unknown``. Returns (comparison of B
        against A, A, B)."""
        with self._lock:
            ea, tree_a = self._entry(a, workload)
            eb, tree_b = self._entry(b, workload)
            n = samples
            while True:
                need = max(0, n - len(ea["samples"])), max(0, n - len(eb["samples"]))
                if any(need):
                    try:
                        self._interleave([(a, ea, need[0]), (b, eb, need[1])], workload, fresh, on_sample)
                    finally:
                        self.cache.save()
                cmp = compare_launches(
                    ea["samples"],
                    ea.get("groups", []),
                    eb["samples"],
                    eb.get("groups", []),
                    alpha=alpha,
                    min_effect_pct=min_effect_pct,
                )
                if cmp.verdict != "unknown" or n >= max_samples:
                    break
                n = min(2 * n, max_samples)
            return cmp, _measurement(a, tree_a, ea), _measurement(b, tree_b, eb)

    def measure_pair(
        self,
        a: State,
        b: State,
        workload: Workload,
        samples: int,
        fresh: bool = False,
        relaunch: bool | None = None,
        single: bool = False,
    ) -> tuple[Measurement, Measurement]:
        """Top both states up to ``samples`` each, interleaved as ``compare_states`` does, so a
        neighbour's load falls on both sides alike instead of on whichever ran second.

        ``fresh``: that many *new* samples each, none reused (an A/B that decides something is
        taken together: samples of another time would make drift look like a difference).
        ``relaunch`` (default: ``fresh``): on servers launched for this A/B, not warm ones that
        served earlier samples (a confirmation); on a one-slot host every block is a new launch
        anyway. ``single``: on a one-slot host, one launch per side, a then b (a confirmation where a
        launch is dear; the launch-to-launch spread comes from the hunt's earlier launches)."""
        if a.label == b.label:
            b = b.model_copy(update={"label": b.label + "-b"})
        with self._lock:
            ea, tree_a = self._entry(a, workload)
            eb, tree_b = self._entry(b, workload)
            if fresh:
                need_a = need_b = samples
            else:
                need_a, need_b = max(0, samples - len(ea["samples"])), max(0, samples - len(eb["samples"]))
            if need_a or need_b:
                try:
                    again = fresh if relaunch is None else relaunch
                    self._interleave([(a, ea, need_a), (b, eb, need_b)], workload, again, None, single)
                finally:
                    self.cache.save()
            return _measurement(a, tree_a, ea), _measurement(b, tree_b, eb)

    def measure_arms(
        self,
        arms: list[State],
        workload: Workload,
        samples: int,
        other_needed: Callable[[list[float], list[float]], bool] | None = None,
    ) -> list[Measurement | None]:
        """Three states measured in one experiment, ``samples`` each, on a one-slot host (two A/Bs
        that share a state: L vs P and P vs O). Launches in the order L P O P: the lead (on its
        server when it is still up from the step before), the pivot split in two blocks around the
        other, so the pivot and the other sit symmetrically in time (a linear drift falls on both
        alike) and the pivot has two launches (its launch-to-launch spread measured). One launch
        fewer than two A B A rounds with a warm lead, two fewer without.

        A warm lead's samples already taken on that launch (the reproduction's, just before) count
        toward its ``samples``: it is the same server, and they were taken moments before the
        rest. Before, the lead took ``samples`` new ones on top: five samples more than the
        experiment needs in every hunt that reproduces and then takes this experiment.

        ``other_needed(lead's samples on its launch, the pivot's first block)``: asked before the
        other is launched; False leaves it out (L P P: the pivot keeps its two launches) and its
        entry in the result None. The hunt's clean A/B asks whether the known-good commit is needed
        at all once clean HEAD gives the drop back (``agent.categories.environment``)."""
        if len(arms) != 3 or len({a.label for a in arms}) != 3:
            raise ValueError("measure_arms takes three states with distinct labels")
        with self._lock:
            entries = [self._entry(s, workload) for s in arms]
            (lead, el), (pivot, ep), (other, eo) = ((s, e) for s, (e, _t) in zip(arms, entries, strict=True))
            warm = self._is_warm(lead, workload)
            on_its_launch = el["groups"][-1] if warm and el["groups"] else 0
            half = (samples + 1) // 2
            order = [
                (lead, el, max(0, samples - on_its_launch)),
                (pivot, ep, half),
                (other, eo, samples),
                (pivot, ep, samples - half),
            ]
            skipped = False
            try:
                for i, (state, entry, block) in enumerate(order):
                    if i == 2 and other_needed is not None:
                        skipped = not other_needed(el["samples"][-samples:], ep["samples"][-half:])
                        if skipped:
                            continue
                    self._take(state, workload, entry, block, i > 0 or not warm, None)
            finally:
                self.cache.save()
            kept = list(zip(arms, entries, strict=True))[: 2 if skipped else 3]
            out: list[Measurement | None] = [_measurement(s, tree, e) for s, (e, tree) in kept]
            return out + [None] * (3 - len(out))

    def _interleave(
        self, sides: list[tuple[State, dict, int]], workload: Workload, fresh: bool, on_sample, single: bool = False
    ) -> None:
        if self.slots >= 2:
            # Two servers up at once: A B A B, one sample at a time (``fresh``: on servers launched
            # for this A/B, not ones that served earlier samples).
            for i in range(max(n for _, _, n in sides)):
                for state, entry, n in sides:
                    if i < n:
                        self._take(state, workload, entry, 1, fresh and i == 0, on_sample)
            return
        # One slot: launches in a balanced order, each giving a block of samples; a side that needs
        # nothing is not launched. Both sides' blocks sit symmetrically in time, so a drift that is
        # linear over the A/B (a neighbour's load rising, clocks settling) falls on both alike.
        # Unless ``fresh`` (a confirmation: servers launched for it), a side whose server is still
        # up from the step before goes first and its first block is new samples on that server:
        # a launch saved, the A B A order kept.
        warm = None if fresh else next((s for s, _e, n in sides if n and self._is_warm(s, workload)), None)
        order = [side for side in sides if side[2]] if single else self._block_order(sides, lead=warm)
        for i, (state, entry, block) in enumerate(order):
            self._take(state, workload, entry, block, i > 0 or warm is None, on_sample)

    def _key(self, state: State, workload: Workload) -> str:
        """The state's key in the cache and among the warm servers."""
        return MeasureCache.key(self._entry(state, workload)[1], state, workload)

    def _is_warm(self, state: State, workload: Workload) -> bool:
        return self._key(state, workload) in self._warm

    def _block_order(
        self, sides: list[tuple[State, dict, int]], lead: State | None = None
    ) -> list[tuple[State, dict, int]]:
        """The launches of a one-slot A/B, in order, as (state, entry, samples). Small A/Bs, where
        one launch per side would do, are A B A (the first side, or ``lead``, split in two halves
        around the second): three launches. Larger ones alternate A B B A A B ... in blocks of
        ``samples_per_launch``. One side only: its blocks in a row."""
        if lead is not None and sides[1][0] is lead:
            sides = sides[::-1]
        (a, ea, na), (b, eb, nb) = sides
        per = self.samples_per_launch(max(na, nb))
        if na and nb and max(na, nb) <= 2 * per and na >= 2:
            return [(a, ea, (na + 1) // 2), (b, eb, nb), (a, ea, na // 2)]
        need = {a.label: na, b.label: nb}
        order, i = [], 0
        while any(need.values()):
            for state, entry, _n in sides if i % 2 == 0 else sides[::-1]:
                block = min(per, need[state.label])
                if block:
                    order.append((state, entry, block))
                    need[state.label] -= block
            i += 1
        return order

    def probe_fn(self, launch_template: str, workload: Workload, env: dict[str, str] | None = None):
        """A ``tools.bisect.Probe``: the next n samples of a commit (cached ones first, then new
        measurements); a state that does not launch raises ProbeError, which bisection skips."""
        handed: dict[str, int] = {}
        lock = threading.Lock()

        def probe(sha: str, n: int) -> list[float]:
            state = State(label=f"probe-{sha[:10]}", ref=sha, launch=launch_template, env=env or {})
            with lock:
                start = handed.get(sha, 0)
                handed[sha] = start + n
            try:
                m = self.measure(state, workload, start + n)
            except OSError as exc:
                raise ProbeError(str(exc)) from exc
            # A HostError (the host stopped answering) goes up as it is: it says nothing of the
            # state, so it is neither a skipped commit nor an end that cannot be measured.
            return m.samples[start : start + n]

        return probe
