"""What a hunt acts through: the Host, the repo's git, the measurer and its cache, the run dir.

Every observation of the world - a tool, a git lookup, a shell probe, a measurement, the probe
budget, the clock - goes through ``Runtime.observe``, which records it as a ``tool_call`` /
``tool_result`` event pair. That one choke point is what makes a run replayable: given a
``Cassette`` (transcripts/cassette.py) the same calls are answered from the recording instead, and the
world (host, repo, servers) is never touched. The host and git are opened lazily for that reason.

Rebuilt from the ``Target`` in whatever process runs the graph (a resume after approval is a new
process). Measurements are cached on disk in the run dir, so a resumed or repeated hunt reuses
every finished sample. Budgets are enforced here: a probe (a state not measured before) beyond
``max_probes``, or any step past ``max_wall_s``, raises ``BudgetExhausted``.
"""

from __future__ import annotations

import contextlib
import itertools
import shlex
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.llm import LLM, LLMConfig, LLMDeadline
from agent.process_start import finish_reserve_s
from agent.state import Hunt, Measured
from tools.bisect import ProbeError
from tools.catalog import ToolContext
from tools.codepath import MAIN_GUARD, entry_modules, imported, judge
from tools.host import Host, HostError, LocalHost
from tools.measure import (
    BrokenState,
    CommandFailed,
    CommandHung,
    Cost,
    Deadline,
    HostBusy,
    MeasureCache,
    State,
    StateFailure,
    Unbuildable,
    Workload,
)
from tools.registry import ToolRecord, call
from tools.serverlog import read_log
from tools.ssh import SSHHost
from tools.stats import one_round_samples, summarize
from tools.text import first_line, seconds
from transcripts.cassette import Resumption, Unanswerable
from transcripts.store import Store, servers_beside

if TYPE_CHECKING:
    from transcripts.cassette import Cassette


class BudgetExhausted(RuntimeError):
    pass


AFTER_APPROVAL = ("apply", "verify")

# A launch costing at least this many samples makes a second A/B round (three more launches on a
# one-slot host) dearer than the few samples that let the first round decide (``ab_samples``). In
# the lab at a few percent of its launch time a launch costs about one sample; on a node, ten.
LAUNCH_IN_SAMPLES = 3.0


# The hunt's event kinds as the transcript store names them (everything else is a note).
STORE_KINDS = {
    "hypothesis": "hypothesis",
    "verdict": "verdict",
    "measurement": "measurement",
    "approval": "approval",
    "error": "error",
    "budget": "error",
}


def with_env(template: str, env: dict[str, str]) -> str:
    """Set variables right before the launch's last step, after its setup (an env file it sources
    would otherwise override them): ``setup && export K=V && exec server``."""
    if not env:
        return template
    exports = " && ".join(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    parts = template.split(" && ")
    return " && ".join([*parts[:-1], exports, parts[-1]])


# Probe failures by kind: recorded with the kind's name and raised again as that kind in a replay.
PROBE_ERRORS: dict[str, type[ProbeError]] = {
    cls.__name__: cls for cls in (ProbeError, BrokenState, Unbuildable, CommandFailed, CommandHung, HostBusy)
}


def probe_error(error: dict) -> ProbeError:
    """The exception a recorded probe failure stands for."""
    cls = PROBE_ERRORS[error["kind"]]
    if issubclass(cls, StateFailure):
        return cls(**{k: error.get(k) for k in ("label", "ref", "how", "failure", "log")})
    return cls(error["message"])


def last_groups(groups: list[int], k: int | None) -> list[int]:
    """The launches that gave the last ``k`` samples (all of them when ``k`` is None)."""
    if k is None:
        return list(groups)
    out: list[int] = []
    for n in reversed(groups):
        if k <= 0:
            break
        out.insert(0, min(n, k))
        k -= n
    return out


def _side(st: State) -> dict:
    """A measured state as a recorded call names it (what replays key their samples on)."""
    return {"ref": st.ref, "launch": st.launch} | ({"env": st.env} if st.env else {})


def error_record(exc: Exception) -> dict:
    """How a failure of the world is recorded: its kind, message, details and what it cost."""
    if isinstance(exc, Deadline):  # the budget ran out mid-probe: the probe was stopped
        error = {"kind": "Deadline", "message": str(exc)}
    elif isinstance(exc, StateFailure):
        error = {"kind": type(exc).__name__, "message": str(exc), **exc.record()}
    elif isinstance(exc, ProbeError):
        kind = type(exc).__name__
        error = {"kind": kind if kind in PROBE_ERRORS else "ProbeError", "message": str(exc)}
    else:
        error = {"kind": type(exc).__name__, "message": str(exc)}
    if getattr(exc, "cost", None) is not None:
        error["cost"] = exc.cost  # type: ignore[attr-defined]
    if getattr(exc, "partial", None):
        error["partial"] = exc.partial  # type: ignore[attr-defined]
    return error


class RecordedError(RuntimeError):
    """A failure the recording says the world answered with, raised again in a replay."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Runtime:
    def __init__(
        self,
        hunt: Hunt,
        run_dir: Path,
        on_event: Callable[[Hunt, str], None] | None = None,
        store: Store | None = None,
        cassette: Cassette | None = None,
    ) -> None:
        self.store = store
        self.run_dir = run_dir
        self.target = hunt.target
        self.cassette = cassette
        self.last_seq: int | None = None  # the last event this runtime wrote (or found written: a resume)
        t = hunt.target
        self.workload = Workload(
            bench=t.workload, metric=t.metric, command=t.command, metric_regex=t.metric_regex, output=t.bench_output
        )
        self.records: list[ToolRecord] = []
        self.on_event = on_event
        self._llm: LLM | None = None
        self._after_approval_deadline: float | None = None
        self.scratch: list[str] = []  # directories made on the host (package overlays), removed at close
        self._hunt: Hunt | None = None  # the hunt of the call under way (``observe``)
        # The time the run lay dead between its drivers (killed, then resumed): not the hunt's to
        # spend, so the wall budget and the clock a person reads leave it out (a hunt resumed the
        # next morning had its whole budget spent overnight).
        self.paused_s = time_paused(store.events(hunt.run_id)) if isinstance(store, Store) else 0.0  # not a replay's

    def budget_start(self, hunt: Hunt) -> float:
        """When the hunt's wall budget began, as if it had never lain dead: its start, moved on
        by the time between a dead driver's last step and the resume."""
        return hunt.started_at + self.paused_s

    def wall_deadline(self, hunt: Hunt) -> float:
        """The time (``time.time()``) the hunt's wall budget runs out, its finish kept within it."""
        return self.budget_start(hunt) + hunt.budget.max_wall_s - finish_reserve_s(hunt.budget.max_wall_s)

    # -- the world, opened on first live use -----------------------------------------------------
    @cached_property
    def host(self) -> Host:
        t = self.target
        return LocalHost() if t.host is None else SSHHost(t.host, known_hosts=t.known_hosts, ssh_config=t.ssh_config)

    @cached_property
    def ctx(self) -> ToolContext:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        t = self.target
        return ToolContext(
            t.repo,
            self.host,
            workdir=self.run_dir,
            cache=MeasureCache(self.run_dir / "measurements.json"),
            pid_dir=servers_beside(self.run_dir.parent),  # shared by the store's runs
            slots=t.slots,
            launch_timeout_s=t.launch_timeout_s,
            sample_timeout_s=t.sample_timeout_s,
            setup=t.setup,
            trace_imports=bool(t.trace_paths) and not t.command,
            busy_wait_s=t.busy_wait_s,
            on_wait=self._waiting,
        )

    def _waiting(self, text: str) -> None:
        """A long wait of the measurer's, shown as the hunt's passing line (the live view, or a
        line on stderr in a log) and not recorded: a wait is no step of the hunt."""
        if self.on_event is not None and self._hunt is not None:
            self.on_event(self._hunt, text)

    def reclaim(self) -> None:
        """Clean up what a dead driver left on the host (its servers, its scratch worktrees). The
        measurer does that when it opens, on first live use; a run resumed after its driver died
        may answer its first calls from the recording (``Resumption``) and open it late or never,
        so it opens it at once."""
        _ = self.ctx.measurer

    # -- the choke point -------------------------------------------------------------------------
    def observe(
        self,
        hunt: Hunt,
        name: str,
        args: dict,
        live: Callable[[], Any],
        approved: bool = False,
        kinds: tuple[str, str] = ("tool_call", "tool_result"),
        call_text: str | None = None,
        result_text: Callable[[Any], str] | None = None,
    ) -> Any:
        """Ask the world (or the cassette) ``name(args)``; record the call and its answer (as the
        event pair ``kinds``; a model's answer is ``llm_request`` / ``llm_response``)."""
        self._hunt = hunt  # the hunt a wait inside this call is shown for
        call_payload = {"name": name, "args": args} | ({"approved": approved} if kinds[0] == "tool_call" else {})
        self._event(hunt, kinds[0], call_text or f"{name} {args}", call_payload)
        t0 = time.perf_counter()
        answer = self.cassette.answer(name, args) if self.cassette is not None else None  # None: ask live
        if isinstance(self.cassette, Resumption) and (done := self.cassette.caught_up()) is not None:
            self._event(
                hunt,
                "note",
                f"caught up after the resume: {done['served']} of {done['recorded']} answers the dead driver "
                f"had recorded served back, {done['events_not_rewritten']} events not written twice; live from here",
                {"phase": "resume", **done},
            )
        if answer is not None:
            result, error = answer.result, answer.error
        else:
            result, error = None, None
            try:
                result = live()
            except (BudgetExhausted, Unanswerable):
                raise
            except Exception as exc:  # recorded as the world's answer, then raised as it was
                error = error_record(exc)
        if answer is None and self.cassette is not None and error is None:
            self.cassette.learn(name, args, result)  # a live answer joins the recorded world
        took = time.perf_counter() - t0
        status = (
            (result_text(result) if result_text else "ok")
            if error is None
            else f"{error['kind']}: {first_line(error['message'])}"
        )
        spent = result.get("cost") if isinstance(result, dict) else None
        if error is not None:
            spent = error.get("cost")
        if spent:
            hunt.cost = Cost.model_validate(hunt.cost).plus(spent).model_dump()
        payload = {"name": name, "result": result, "error": error}
        if isinstance(result, dict) and isinstance(result.get("usage"), dict):
            payload["usage"] = result["usage"]  # a model's token usage, counted per event
        self._event(hunt, kinds[1], f"{name}: {status}", payload, took)
        if error is not None:
            if error["kind"] == "Deadline":
                for got in error.get("partial") or []:  # what the stopped measurement had taken
                    self.record_samples(
                        hunt, f"{got['label']} (stopped by the budget)", got["ref"], got["samples"],
                        launch=got["launch"], env=got["env"],
                    )  # fmt: skip
                during = "waiting for the model" if name == "llm" else "mid-probe"
                raise BudgetExhausted(f"wall-time budget of {seconds(hunt.budget.max_wall_s)} s exhausted {during}")
            if error["kind"] in PROBE_ERRORS:
                raise probe_error(error)
            raise RecordedError(error["kind"], error["message"])
        return result

    def chat(self, hunt: Hunt, messages: list[dict], tools: list[dict]) -> dict:
        """One model call of the LLM policy (recorded; served from the recording in a replay).
        Returns the ``LLMReply`` as data; an endpoint that never answers raises ``RecordedError``
        of kind ``LLMError``."""
        assert hunt.llm is not None and hunt.model
        cfg = LLMConfig(
            model=hunt.model,
            base_url=hunt.llm.base_url,
            timeout_s=hunt.llm.timeout_s,
            max_attempts=hunt.llm.max_attempts,
            backoff_s=hunt.llm.backoff_s,
        )

        def live() -> dict:
            if self._llm is None:
                self._llm = LLM(cfg)
            try:  # no longer than the hunt's wall-time budget allows, as a probe
                return self._llm.chat(messages, tools, deadline=self.wall_deadline(hunt)).model_dump()
            except LLMDeadline as exc:
                raise Deadline(str(exc)) from None

        def said(reply: dict) -> str:
            names = ", ".join(c["name"] for c in reply["tool_calls"])
            return (reply.get("content") or "")[:200] + (f" [tools: {names}]" if names else "")

        args = {"model": hunt.model, "messages": messages, "tools": [t["function"]["name"] for t in tools]}
        return self.observe(
            hunt,
            "llm",
            args,
            live,
            kinds=("llm_request", "llm_response"),
            call_text=f"{hunt.model}: {len(messages)} messages, last {messages[-1].get('role') if messages else None}",
            result_text=said,
        )

    def _event(self, hunt: Hunt, kind: str, text: str, payload: dict, duration: float | None = None) -> None:
        if self.store is None:
            return
        if isinstance(self.cassette, Resumption) and (seq := self.cassette.stored(kind, text, payload)) is not None:
            # The dead driver recorded this very event before it died: not twice. It is still the
            # transcript's place (a node re-run wholly from the recording ends its checkpoint there).
            self.last_seq = seq
            return
        self.last_seq = self.store.event(hunt.run_id, kind, text, payload, duration)

    # -- tools ---------------------------------------------------------------------------------
    def tool(self, name: str, args: dict, approved: bool = False, hunt: Hunt | None = None) -> ToolRecord:
        assert hunt is not None
        raw = self.observe(
            hunt, name, args, lambda: call(name, args, self.ctx, approved=approved).model_dump(mode="json"), approved
        )
        rec = ToolRecord.model_validate(raw)
        self.records.append(rec)
        return rec

    def resolve(self, hunt: Hunt, ref: str, paths: list[str] | None = None) -> str:
        """A ref's SHA; "WORKTREE" is a snapshot commit of the uncommitted work (``paths`` of it)."""
        args: dict[str, Any] = {"ref": ref} if paths is None else {"ref": ref, "paths": paths}

        def live() -> str:
            return self.ctx.git.snapshot(paths) if ref == "WORKTREE" else self.ctx.git.rev_parse(ref)

        return self.observe(hunt, "git_resolve", args, live)

    def rev_list(self, hunt: Hunt, good: str, head: str) -> list[str]:
        return self.observe(
            hunt, "git_rev_list", {"good": good, "head": head}, lambda: self.ctx.git.rev_list(good, head)
        )

    def shell(self, hunt: Hunt, cmd: str, timeout: float = 60, name: str = "host_run") -> dict:
        """A read-only shell probe on the host: exit code and output. ``name``: what the record
        calls it (a read the hunt makes itself, e.g. ``package_snapshot``, is not a ``host_run``
        a model's shell could be said to have made)."""

        def live() -> dict:
            left = None if hunt.phase in AFTER_APPROVAL else self.wall_deadline(hunt) - time.time()
            # The hunt's wall budget bounds these waits too (an overlay unpacked for minutes must not
            # carry it past --max-wall); the next check_wall then ends the hunt.
            res = self.host.run(cmd, timeout=timeout if left is None else min(timeout, max(1.0, left)))
            return {"exit_code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr[-2000:]}

        return self.observe(hunt, name, {"cmd": cmd}, live)

    def server_args(self, hunt: Hunt, label: str) -> dict[str, str]:
        """The server args logged by the first launch of the state measured under ``label``."""
        return self.observe(hunt, "server_args", {"label": label}, lambda: self._logged(label, "server_args"))

    def logged_versions(self, hunt: Hunt, label: str) -> dict[str, str]:
        """The versions of its stack (NCCL, CUDA, the framework) the server logged at its first
        launch of the state measured under ``label`` (``tools.serverlog``)."""
        return self.observe(hunt, "server_versions", {"label": label}, lambda: self._logged(label, "versions"))

    def _logged(self, label: str, field: str) -> dict[str, str]:
        """``field`` of the first log of ``label``'s launches that has it (``ServerLog``), else {}."""
        for log in sorted((self.run_dir / "logs").glob(f"{label}-*.log")):
            found = getattr(read_log(log), field)
            if found:
                return found
        return {}

    def code_paths(self, hunt: Hunt, good: str, head: str) -> dict:
        """Which commits of good..head touch a file the workload executes (``tools.codepath``):
        ``{"traced": bool, "why": str, "commits": [CommitPath...]}``. A launch traced earlier in
        the hunt gives an end's imports; a benchmark command is run once more, traced."""

        def live() -> dict:
            t, m, git = hunt.target, self.ctx.measurer, self.ctx.git
            if t.trace_paths is False:
                return {"traced": False, "why": "tracing is off (--no-trace-paths)", "commits": []}
            modules: set[str] = set()
            for ref in (good, head):
                got = m.imports_at(ref)
                if got is None and t.command:
                    got = m.trace_command(ref, self.workload) or None
                if got is None:
                    why = (
                        "the benchmark command imports no Python module"
                        if t.command
                        else f"no traced launch of {ref[:10]}"
                        + ("" if t.trace_paths else " (launches are traced with --trace-paths)")
                    )
                    return {"traced": False, "why": why, "commits": []}
                modules |= got
            entry, scripts = entry_modules(t.command or t.launch)
            present = git.ls_files(good) | git.ls_files(head)
            if not any(imported(f, modules) for f in present if f.endswith(".py")):
                # The work happened where the trace cannot see: a child interpreter whose stderr
                # the benchmark keeps to itself, or code that is not Python. "Imported at
                # neither end" would then be said of the very files that run.
                why = (
                    f"the trace saw {len(modules)} modules imported but none of the repository's own "
                    "(a subprocess whose stderr the benchmark keeps, or no Python?): nothing is pruned"
                )
                return {"traced": False, "why": why, "commits": []}
            for ref in (good, head):  # a file run as a script prints no import line
                scripts |= git.grep_files(ref, MAIN_GUARD, "*.py")
            commits = [
                judge(sha, files, modules | entry, scripts, present).model_dump()
                for sha, files in git.changed_paths(good, head).items()
            ]
            return {"traced": True, "why": f"{len(modules)} modules imported at the two ends", "commits": commits}

        return self.observe(hunt, "code_paths", {"good": good, "head": head}, lambda: self._costed(hunt, live))

    def workload_imports(self, hunt: Hunt, ref: str) -> dict:
        """Every module a benchmark command loaded at ``ref``, from one traced run of it
        (``tools.codepath``: kept, the code-path pruning reuses it). ``{"modules": [...] or None,
        "why": str}``. A launch's trace is not read for this: it times import statements only and
        misses what ``importlib`` loads (a kernel package, a plugin), so it cannot say a package
        is not used."""

        def live() -> dict:
            t, m = hunt.target, self.ctx.measurer
            if not t.command:
                return {"modules": None, "why": "a server's import trace misses what importlib loads"}
            if t.trace_paths is False:
                return {"modules": None, "why": "tracing is off (--no-trace-paths)"}
            got = m.imports_at(ref) or m.trace_command(ref, self.workload)  # a resumed hunt kept its trace
            if not got:
                return {"modules": None, "why": "the benchmark command printed no import"}
            return {"modules": sorted(got), "why": f"{len(got)} modules loaded at {ref[:10]}"}

        return self.observe(hunt, "workload_imports", {"ref": ref}, lambda: self._costed(hunt, live))

    def say(self, hunt: Hunt, kind: str, text: str, payload: dict | None = None) -> None:
        hunt.log(kind, text)
        self._event(hunt, STORE_KINDS.get(kind, "note"), text, {"phase": kind, **(payload or {})})
        if self.on_event is not None:
            self.on_event(hunt, text)

    def check_wall(self, hunt: Hunt) -> None:
        """The hunt's wall budget runs from its start to its proposal; re-measuring an approved fix
        (hours later, perhaps) has a budget of its own (see ``_arm``)."""
        if hunt.phase in AFTER_APPROVAL:
            return
        elapsed = self.observe(hunt, "clock", {}, lambda: round(time.time() - self.budget_start(hunt), 3))
        if elapsed > hunt.budget.max_wall_s - finish_reserve_s(hunt.budget.max_wall_s):
            raise BudgetExhausted(f"wall-time budget of {seconds(hunt.budget.max_wall_s)} s exhausted")

    def _arm(self, hunt: Hunt) -> None:
        """Give the measurer the wall-clock deadline it must stop at, mid-probe if need be."""
        m = self.ctx.measurer
        if hunt.phase in AFTER_APPROVAL:
            if self._after_approval_deadline is None:
                budget = hunt.budget.max_wall_s
                self._after_approval_deadline = time.time() + budget - finish_reserve_s(budget)
            m.deadline = self._after_approval_deadline
        else:
            m.deadline = self.wall_deadline(hunt)

    def _costed(self, hunt: Hunt, fn: Callable[[], dict], sampled: list[tuple[str, State]] = ()) -> dict:
        """Run a live measurement with the deadline armed. What it cost travels with its answer
        (or its failure: a launch that crashed was paid for too), so ``observe`` adds it to the
        hunt's cost from the recording, live or replayed alike. ``sampled``: the (label, state)
        pairs the call samples; when the budget stops it, the samples each had taken travel with
        the failure (``partial``), for the Numbers (a trial's Cost said 15 samples, its table 5)."""
        self._arm(hunt)
        m = self.ctx.measurer
        before = m.cost
        had = [len(m.samples_of(st, self.workload)) for _label, st in sampled]
        try:
            out = fn()
        except BaseException as exc:
            exc.cost = m.cost.minus(before).model_dump()  # type: ignore[attr-defined]
            if isinstance(exc, Deadline) and sampled:
                taken = [
                    (lb, st, m.samples_of(st, self.workload)[n:]) for (lb, st), n in zip(sampled, had, strict=True)
                ]
                exc.partial = [  # type: ignore[attr-defined]
                    {"label": lb, "ref": st.ref, "launch": st.launch, "env": st.env, "samples": got}
                    for lb, st, got in taken
                    if got
                ]
            raise
        out["cost"] = m.cost.minus(before).model_dump()
        return out

    def broken_state(self, hunt: Hunt, label: str, exc: ProbeError) -> None:
        """Note a state that does not serve or build (once per ref and label), for the report."""
        if not isinstance(exc, StateFailure):
            return
        entry = exc.record() | {"label": label}
        if not any(b["label"] == label and b["ref"] == exc.ref for b in hunt.broken):
            hunt.broken.append(entry)
            self.say(hunt, "broken", f"{label} ({exc.ref}) {exc.how}: {exc.failure}", {"broken": entry})

    # -- measurement ---------------------------------------------------------------------------
    def _count_probe(self, hunt: Hunt, state: State) -> None:
        """Count a state not measured before against the budget. The run's on-disk cache is what
        counts (it survives a SIGKILL; the in-memory count of the node that was running does not)."""
        self.check_wall(hunt)

        def live() -> dict:
            done = sum(1 for e in self.ctx.cache.data.values() if e["samples"])
            return {"new": not self.ctx.measurer.samples_of(state, self.workload), "measured": done}

        args = {"ref": state.ref, "launch": state.launch} | ({"env": state.env} if state.env else {})
        got = self.observe(hunt, "probe_budget", args, live)
        done = got["measured"]
        if got["new"]:
            if done >= hunt.budget.max_probes:
                raise BudgetExhausted(f"probe budget of {hunt.budget.max_probes} exhausted")
            done += 1
        hunt.probes = max(hunt.probes, done)

    def measure(
        self,
        hunt: Hunt,
        label: str,
        ref: str,
        env: dict[str, str] | None = None,
        launch: str | None = None,
        samples: int | None = None,
        paths: list[str] | None = None,
    ) -> Measured:
        """Measure a state (cached); the result joins the hunt's measurements under a new id.
        ``ref`` "WORKTREE" is the uncommitted work (only ``paths`` of it, when given)."""
        return self.measure_planned(hunt, self.planned(hunt, label, ref, env, launch, paths), samples)

    def measure_planned(
        self, hunt: Hunt, planned: Measured, samples: int | None = None, fresh: bool = False
    ) -> Measured:
        """Measure a state ``planned`` made (already counted against the probe budget) on its own.
        ``fresh``: ``samples`` new samples on a server launched for them, only those returned (a
        confirmation's side whose other side was measured fresh moments before: ``fresh_ab``'s
        ``known_a``)."""
        label, env, state = planned.label, planned.env, self._state(hunt, planned)
        sha = state.ref
        n = samples or hunt.budget.samples
        if fresh:
            self.check_wall(hunt)
            self.say(hunt, "probe", f"measuring {label} ({sha[:10]}) on its own launch ({n} new samples)")
        else:
            self.say(hunt, "probe", f"measuring {label} ({sha[:10]})")

        def live() -> dict:
            m = self.ctx.measurer.measure(state, self.workload, n, fresh=fresh)
            k = n if fresh else None  # fresh: only the new samples are this measurement's
            return {"samples": m.samples[-k:] if k else m.samples, "verify_ms": m.verify_ms,
                    "groups": last_groups(m.groups, k)}  # fmt: skip

        args = {"ref": sha, "launch": state.launch, "samples": n} | ({"fresh": True} if fresh else {})
        args |= {"env": state.env} if state.env else {}
        try:
            got = self.observe(hunt, "measure", args, lambda: self._costed(hunt, live, [(label, state)]))
        except ProbeError as exc:
            self.broken_state(hunt, label, exc)
            raise
        return self._measured(hunt, label, sha, env or {}, state.launch, got)

    def planned(
        self,
        hunt: Hunt,
        label: str,
        ref: str,
        env: dict[str, str] | None = None,
        launch: str | None = None,
        paths: list[str] | None = None,
    ) -> Measured:
        """A state an A/B is about to measure (``measure``'s arguments): resolved and counted
        against the probe budget, with no samples yet. An A/B measures its two sides together
        (``measure_pair``), so nothing is measured on its own first."""
        sha = self.resolve(hunt, ref, paths)
        if hunt.target.command:  # a benchmark command: the env is its own (no launch to put it in)
            state = State(label=label, ref=sha, launch=launch or hunt.target.launch, env=env or {})
        else:
            state = State(label=label, ref=sha, launch=with_env(launch or hunt.target.launch, env or {}))
        self._count_probe(hunt, state)
        empty = {"samples": [], "median": 0, "ci_low": 0, "ci_high": 0, "cv": 0}
        return Measured(id="", label=label, ref=sha, launch=state.launch, env=env or {}, **empty)

    def ab_samples(self, hunt: Hunt, alpha: float = 0.01) -> int:
        """New samples per side for an A/B's first round: the budget's samples, at least 6 (5 + 5
        reach p <= 0.01 only with independent samples). On a one-slot host where a launch costs
        at least ``LAUNCH_IN_SAMPLES`` samples (from this hunt's own measured costs, which travel
        in its recording, so a replay decides alike), enough for a round of three launches to
        decide alone (``stats.one_round_samples``): a few more samples are cheaper than a second
        round's three launches."""
        n = max(hunt.budget.samples, 6)
        return max(n, one_round_samples(alpha)) if self.dear_launches(hunt) else n

    def _state(self, hunt: Hunt, m: Measured) -> State:
        """The measured state of ``m`` as the measurer keys it."""
        return State(label=m.label, ref=m.ref, launch=m.launch, env=m.env if hunt.target.command else {})

    def measure_pair(
        self,
        hunt: Hunt,
        a: Measured,
        b: Measured,
        samples: int,
        fresh: bool = False,
        relaunch: bool = False,
        single: bool = False,
    ) -> tuple[Measured, Measured]:
        """More samples of two states, taken interleaved (see ``Measurer.measure_pair``);
        ``fresh``: ``samples`` new ones of each, and only those returned (an A/B never decides on
        samples taken at another time); ``relaunch``: on servers launched for it (a confirmation)."""
        self.check_wall(hunt)
        sa, sb = self._state(hunt, a), self._state(hunt, b)
        how = f"{samples} new samples each" if fresh else f"{samples} samples each"
        way = "one launch each" if single else "interleaved"
        self.say(hunt, "probe", f"measuring {a.label} and {b.label} {way} ({how})")

        def live() -> dict:
            ma, mb = self.ctx.measurer.measure_pair(
                sa, sb, self.workload, samples, fresh=fresh, relaunch=relaunch, single=single
            )
            k = samples if fresh else None  # fresh: only the new samples are this A/B's
            return {
                "a": {"samples": ma.samples[-k:] if k else ma.samples, "verify_ms": ma.verify_ms},
                "b": {"samples": mb.samples[-k:] if k else mb.samples, "verify_ms": mb.verify_ms},
                "groups": {"a": last_groups(ma.groups, k), "b": last_groups(mb.groups, k)},
            }

        args = {"a": _side(sa), "b": _side(sb), "samples": samples} | ({"fresh": True} if fresh else {})
        if relaunch:
            args["relaunch"] = True
        if single:
            args["single"] = True
        try:
            sampled = [(a.label, sa), (b.label, sb)]
            got = self.observe(hunt, "measure_pair", args, lambda: self._costed(hunt, live, sampled))
        except ProbeError as exc:
            self.broken_state(hunt, getattr(exc, "label", f"{a.label}/{b.label}"), exc)  # the side that failed
            raise
        for k in ("a", "b"):
            got[k]["groups"] = got.get("groups", {}).get(k, [])
        return (
            self._measured(hunt, a.label, a.ref, a.env, a.launch, got["a"]),
            self._measured(hunt, b.label, b.ref, b.env, b.launch, got["b"]),
        )

    def measure_arms(
        self,
        hunt: Hunt,
        arms: list[Measured],
        samples: int,
        other_needed: Callable[[list[float], list[float]], bool] | None = None,
    ) -> list[Measured | None]:
        """Three states in one experiment (``Measurer.measure_arms``: launches L P O P on a
        one-slot host), ``samples`` each (a warm lead's samples on its launch count), recorded as
        one call. ``other_needed``: asked before the third arm is launched (its answer recorded
        with the call); an arm left out is None."""
        self.check_wall(hunt)
        states = [self._state(hunt, m) for m in arms]
        labels = ", ".join(m.label for m in arms)
        self.say(hunt, "probe", f"measuring {labels} in one experiment ({samples} samples each on its launches)")

        def live() -> dict:
            got = self.ctx.measurer.measure_arms(states, self.workload, samples, other_needed)
            return {
                "arms": [{"samples": m.samples[-samples:], "verify_ms": m.verify_ms} if m else None for m in got],
                "groups": [last_groups(m.groups, samples) if m else [] for m in got],
            }

        args = {"arms": [_side(st) for st in states], "samples": samples, "fresh": True}
        if other_needed is not None:
            args["other_if_needed"] = True
        try:
            sampled = [(m.label, st) for m, st in zip(arms, states, strict=True)]
            got = self.observe(hunt, "measure_arms", args, lambda: self._costed(hunt, live, sampled))
        except ProbeError as exc:
            self.broken_state(hunt, getattr(exc, "label", labels), exc)
            raise
        return [
            self._measured(hunt, m.label, m.ref, m.env, m.launch, {**side, "groups": groups}) if side else None
            for m, side, groups in zip(arms, got["arms"], got["groups"], strict=True)
        ]

    def fresh_pair(
        self,
        hunt: Hunt,
        a: tuple[str, str] | Measured,
        b: tuple[str, str] | Measured,
        samples: int,
        single: bool = False,
    ) -> tuple[Measured, Measured]:
        """A fresh A/B of two states ((label, ref) each, or a state measured before: its env and
        launch, none of its samples): ``samples`` new samples of each, taken interleaved on newly
        launched servers (or in a balanced launch order on a one-slot host; ``single``: one launch
        each), none reused from earlier measurements. What a confirmation is made of."""
        sides = [side if isinstance(side, Measured) else self.planned(hunt, *side) for side in (a, b)]
        return self.measure_pair(hunt, sides[0], sides[1], samples, fresh=True, relaunch=True, single=single)

    def dear_launches(self, hunt: Hunt) -> bool:
        """A one-slot server host where a launch costs at least ``LAUNCH_IN_SAMPLES`` samples (this
        hunt's own measured costs, which travel in its recording, so a replay decides alike)."""
        ratio = Cost.model_validate(hunt.cost).launch_in_samples() if hunt.cost else None
        return hunt.target.slots == 1 and not hunt.target.command and ratio is not None and ratio >= LAUNCH_IN_SAMPLES

    def joined(self, hunt: Hunt, first: Measured, more: Measured) -> Measured:
        """Two measurements of one state as one (a second fresh round of a confirmation)."""
        got = {
            "samples": first.samples + more.samples,
            "verify_ms": [v for v in (first.verify_ms, more.verify_ms) if v is not None],
            "groups": first.groups + more.groups,
        }
        return self._measured(hunt, first.label, first.ref, first.env, first.launch, got)

    def _measured(self, hunt: Hunt, label: str, sha: str, env: dict, launch: str, got: dict) -> Measured:
        """A measurement's samples as the next entry of the hunt's measurements (stored, said)."""
        s = summarize(got["samples"])
        verify = got["verify_ms"]
        out = Measured(
            id=f"m{len(hunt.measurements) + 1}",
            label=label,
            ref=sha,
            env=env,
            launch=launch,
            samples=got["samples"],
            groups=got.get("groups") or [],
            median=s.median,
            ci_low=s.ci_low,
            ci_high=s.ci_high,
            cv=s.cv,
            verify_ms=sum(verify) / len(verify) if verify else None,
        )
        hunt.measurements.append(out)
        if self.store is not None:
            self.store.put_measurement(hunt.run_id, out.model_dump(), hunt.target.metric)
        self.say(
            hunt,
            "measurement",
            f"{label}: {out.median:.4g} {hunt.target.metric} "
            f"[{out.ci_low:.4g}, {out.ci_high:.4g}] over {len(out.samples)} samples",
        )
        return out

    def probe_state(self, hunt: Hunt, sha: str, label: str = "bisect") -> State:
        """A history probe's state: the target's launch under ``hunt.probe_env``."""
        if hunt.target.command:  # a benchmark command: the env is its own
            return State(label=label, ref=sha, launch=hunt.target.launch, env=hunt.probe_env)
        return State(label=label, ref=sha, launch=with_env(hunt.target.launch, hunt.probe_env))

    def probe_fn(self, hunt: Hunt, seen: dict[str, list[float]], twin: Callable[[str], str] | None = None):
        """A bisection probe that counts new states against the hunt's budget; the samples it hands
        out are collected in ``seen`` (sha -> samples) for the record. ``twin``: the commit to
        measure in place of the one bisected (that commit with an earlier culprit reverted:
        ``agent.residual``)."""
        inner = None
        handed: dict[str, int] = {}  # as the measurer's probe hands them: the next n of the state's samples

        def probe(bisected: str, n: int) -> list[float]:
            nonlocal inner
            sha = twin(bisected) if twin is not None else bisected
            state = self.probe_state(hunt, sha)
            self._count_probe(hunt, state)  # BudgetExhausted ends the bisection (not a skip)
            self.say(hunt, "probe", f"bisect probe {sha[:10]} ({n} samples)")

            def live() -> dict:
                nonlocal inner
                if inner is None:
                    inner = self.ctx.measurer.probe_fn(state.launch, self.workload, state.env)
                return {"samples": inner(sha, n)}

            start = handed.get(sha, 0)
            handed[sha] = start + n
            args = {"ref": sha, "launch": state.launch, "start": start, "n": n} | (
                {"env": state.env} if state.env else {}
            )
            try:
                got = self.observe(hunt, "probe", args, lambda: self._costed(hunt, live))
            except ProbeError as exc:
                self.broken_state(hunt, f"bisect {sha[:8]}", exc)
                raise
            samples = got["samples"] if isinstance(got, dict) else got  # runs recorded before costs: a list
            seen.setdefault(bisected, []).extend(samples)
            return samples

        return probe

    def record_samples(
        self,
        hunt: Hunt,
        label: str,
        sha: str,
        samples: list[float],
        launch: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """Add samples taken outside ``measure`` (bisection probes; a measurement the budget
        stopped, with its state's ``launch`` and ``env``) to the hunt's measurements."""
        s = summarize(samples)
        hunt.measurements.append(
            Measured(
                id=f"m{len(hunt.measurements) + 1}",
                label=label,
                ref=sha,
                env=hunt.probe_env if env is None else env,
                launch=self.probe_state(hunt, sha).launch if launch is None else launch,
                samples=samples,
                median=s.median,
                ci_low=s.ci_low,
                ci_high=s.ci_high,
                cv=s.cv,
            )
        )
        if self.store is not None:
            self.store.put_measurement(hunt.run_id, hunt.measurements[-1].model_dump(), hunt.target.metric)

    def close(self) -> None:
        """Scratch files removed, warm servers stopped, worktrees removed, the host let go. A host
        that stopped answering has nothing to remove from here (the next start there removes what
        is left): each step is tried on its own, and none raises for it. A trial's hunt whose sshd
        died printed its one "host: ... stopped at its last checkpoint" line, then 150 lines of
        tracebacks from this cleanup."""
        if self.scratch and "host" in self.__dict__:
            with contextlib.suppress(HostError):
                self.host.run(["rm", "-rf", *dict.fromkeys(self.scratch)], timeout=60)
            self.scratch.clear()
        if "ctx" in self.__dict__:
            with contextlib.suppress(HostError):
                self.ctx.close()  # warm servers stopped, their worktrees removed
        if "host" in self.__dict__:
            with contextlib.suppress(HostError):
                self.host.close()


RESUMED = "resumed from the last checkpoint"  # the note a resume writes (``Hunter.continue_run``)


def time_paused(events: list[dict]) -> float:
    """Seconds a run lay dead: for each resume, the time from the event before it (the dead
    driver's last step) to the resume."""
    return sum(
        max(0.0, e["t"] - before["t"])
        for before, e in itertools.pairwise(events)
        if e["kind"] == "note" and e["text"] == RESUMED
    )
