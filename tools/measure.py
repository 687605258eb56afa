"""Measure repository states on a Host: samples, summaries, interleaved A/B comparisons, a cache.

A *state* is a commit (or a snapshot commit of uncommitted work) plus a launch configuration
(command template and env). Measuring it checks the commit out in a scratch worktree, launches
the server, runs the workload ``samples`` times and stops everything. Results are cached by
(tree hash, launch config, workload): the same state is never measured twice in a run, and a
later request for more samples only takes the missing ones.

``compare_states`` interleaves the two sides (A B A B ...) on two warm servers, or restarts the
server for every sample (``fresh=True``), so machine drift hits both sides alike; while the
verdict is ``unknown`` it doubles the samples, up to a cap.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import threading
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from pydantic import BaseModel

from tools.bench import BenchConfig, run_bench
from tools.bisect import ProbeError
from tools.git import CliGit
from tools.host import Host, HostError
from tools.server import Server, ServerError, launch, reap
from tools.stats import Comparison, Summary, compare, summarize

METRICS = ("tok_per_s", "output_tok_per_s", "ttft_s", "latency_s")


class Workload(BaseModel):
    """What one sample is: a benchmark run against the launched server (endpoint filled per server)
    and the metric it yields, or, for projects that are not servers, ``command``: a shell template
    run in the state's worktree (``{worktree}`` filled) whose output's last number is the sample."""

    bench: BenchConfig | None = None
    metric: str = "tok_per_s"
    command: str | None = None

    def key(self) -> str:
        bench = self.bench.model_dump(mode="json", exclude={"endpoint", "server_log"}) if self.bench else None
        return json.dumps({"bench": bench, "metric": self.metric, "command": self.command}, sort_keys=True)


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


def _measurement(state: State, tree: str, entry: dict) -> Measurement:
    return Measurement(
        state=state,
        tree=tree,
        samples=list(entry["samples"]),
        summary=summarize(entry["samples"]),
        verify_ms=list(entry["verify_ms"]),
        launches=entry["launches"],
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
            return self.data.setdefault(key, {"samples": [], "verify_ms": [], "launches": 0})

    def save(self) -> None:
        """Atomically (a temporary file renamed over the old one): a process killed mid-save leaves
        the previous cache whole, never a truncated file."""
        if self.path:
            with self.lock:
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(self.data))
                os.replace(tmp, self.path)


class Measurer:
    def __init__(
        self,
        host: Host,
        git: CliGit,
        log_dir: str | Path,
        cache: MeasureCache | None = None,
        health_timeout_s: float = 120.0,
        pid_dir: str | Path | None = None,
    ) -> None:
        self.host = host
        self.git = git
        self.log_dir = Path(log_dir)
        self.cache = cache or MeasureCache()
        self.health_timeout_s = health_timeout_s
        self._trees: dict[str, str] = {}  # commit sha -> tree sha
        # What a killed predecessor left behind: its servers (registered in ``pid_dir``, shared by
        # the runs of one store) and its scratch worktrees.
        self.pid_dir = Path(pid_dir) if pid_dir else self.log_dir.parent / "servers"
        reap(self.pid_dir, host)
        git.remove_stale_worktrees()

    # -- one server ---------------------------------------------------------------------------
    def _server(self, stack: ExitStack, state: State) -> Server:
        wt = stack.enter_context(self.git.worktree(state.ref))
        log = self.log_dir / f"{state.label}-{state.ref[:10]}-{uuid.uuid4().hex[:6]}.log"
        try:
            server = launch(
                state.launch,
                wt,
                log,
                env=state.env,
                host=self.host,
                health_timeout_s=self.health_timeout_s,
                pid_dir=self.pid_dir,
            )
        except ServerError as exc:
            raise ProbeError(f"{state.label} ({state.ref[:10]}) does not launch: {exc}") from exc
        stack.callback(server.stop)
        return server

    def _open(self, stack: ExitStack, state: State, workload: Workload, entry: dict):
        """Make a state ready to sample (launch its server, or just check it out); returns sample()."""
        if workload.command is None:
            server = self._server(stack, state)
            entry["launches"] += 1
            return lambda: self._sample(server, workload)
        wt = stack.enter_context(self.git.worktree(state.ref))
        entry["launches"] += 1
        return lambda: self._run_command(wt, workload, state.env)

    def _run_command(self, worktree: str, workload: Workload, env: dict[str, str]) -> tuple[float, float | None]:
        assert workload.command is not None
        cmd = workload.command.replace("{worktree}", shlex.quote(worktree))
        res = self.host.run(cmd, cwd=worktree, env=env or None, timeout=self.health_timeout_s)
        numbers = re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", res.stdout)
        if not res.ok or not numbers:
            why = "timed out" if res.timed_out else f"exit {res.exit_code}" if not res.ok else "printed no number"
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [""]
            raise ProbeError(f"benchmark command {why} in {worktree}: {tail[0][:200]}")
        return float(numbers[-1]), None

    def _sample(self, server: Server, workload: Workload) -> tuple[float, float | None]:
        assert workload.bench is not None
        cfg = workload.bench.model_copy(update={"endpoint": f"{server.base_url}/v1", "server_log": None})
        res = run_bench(cfg, server=server)
        if res.errors:
            raise ProbeError(f"{res.errors} request(s) failed: {res.samples[0].error}")
        value = getattr(res, workload.metric)
        if workload.metric in ("ttft_s", "latency_s"):
            value = value.p50
        return float(value), res.verify_ms

    def _entry(self, state: State, workload: Workload) -> tuple[dict, str]:
        tree = self._trees.get(state.ref)
        if tree is None:  # a commit's tree never changes: one git call per commit, not per lookup
            tree = self._trees[state.ref] = self.git.tree_hash(state.ref)
        return self.cache.get(MeasureCache.key(tree, state, workload)), tree

    def measure(
        self, state: State, workload: Workload, samples: int, on_sample: Callable[[str, float], None] | None = None
    ) -> Measurement:
        """At least ``samples`` samples of ``state`` (cached ones count)."""
        entry, tree = self._entry(state, workload)
        missing = samples - len(entry["samples"])
        if missing > 0:
            with ExitStack() as stack:
                sample = self._open(stack, state, workload, entry)
                for _ in range(missing):
                    value, verify = sample()
                    entry["samples"].append(value)
                    if verify is not None:
                        entry["verify_ms"].append(verify)
                    if on_sample:
                        on_sample(state.label, value)
            self.cache.save()
        return _measurement(state, tree, entry)

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
        """Interleaved A/B: A B A B ... on warm servers (or a fresh launch per sample), doubling the
        samples while the verdict is ``unknown``. Returns (comparison of B against A, A, B)."""
        ea, tree_a = self._entry(a, workload)
        eb, tree_b = self._entry(b, workload)
        n = samples
        with ExitStack() as warm:  # warm servers live across the doubling rounds
            samplers: dict[str, object] = {}
            while True:
                need = max(0, n - len(ea["samples"])), max(0, n - len(eb["samples"]))
                if any(need):
                    self._interleave([(a, ea, need[0]), (b, eb, need[1])], workload, fresh, on_sample, warm, samplers)
                    self.cache.save()
                cmp = compare(ea["samples"], eb["samples"], alpha=alpha, min_effect_pct=min_effect_pct)
                if cmp.verdict != "unknown" or n >= max_samples:
                    break
                n = min(2 * n, max_samples)
        return cmp, _measurement(a, tree_a, ea), _measurement(b, tree_b, eb)

    def measure_pair(self, a: State, b: State, workload: Workload, samples: int) -> tuple[Measurement, Measurement]:
        """Top both states up to ``samples`` each, interleaved A B A B on one warm server each, so
        a neighbour's load falls on both sides alike instead of on whichever ran second."""
        if a.label == b.label:
            b = b.model_copy(update={"label": b.label + "-b"})
        ea, tree_a = self._entry(a, workload)
        eb, tree_b = self._entry(b, workload)
        need_a, need_b = max(0, samples - len(ea["samples"])), max(0, samples - len(eb["samples"]))
        if need_a or need_b:
            with ExitStack() as warm:
                self._interleave([(a, ea, need_a), (b, eb, need_b)], workload, False, None, warm, {})
            self.cache.save()
        return _measurement(a, tree_a, ea), _measurement(b, tree_b, eb)

    def _interleave(
        self,
        sides: list[tuple[State, dict, int]],
        workload: Workload,
        fresh: bool,
        on_sample,
        warm: ExitStack,
        samplers: dict[str, object],
    ) -> None:
        for i in range(max(n for _, _, n in sides)):
            for state, entry, n in sides:
                if i >= n:
                    continue
                if fresh:
                    with ExitStack() as once:
                        value, verify = self._open(once, state, workload, entry)()
                else:
                    if state.label not in samplers:
                        samplers[state.label] = self._open(warm, state, workload, entry)
                    value, verify = samplers[state.label]()  # type: ignore[operator]
                entry["samples"].append(value)
                if verify is not None:
                    entry["verify_ms"].append(verify)
                if on_sample:
                    on_sample(state.label, value)

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
            except (HostError, OSError) as exc:
                raise ProbeError(str(exc)) from exc
            return m.samples[start : start + n]

        return probe
