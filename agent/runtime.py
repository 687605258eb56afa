"""What a hunt acts through: the Host, the repo's git, the measurer and its cache, the run dir.

Rebuilt from the ``Target`` in whatever process runs the graph (a resume after approval is a new
process). Measurements are cached on disk in the run dir, so a resumed or repeated hunt reuses
every finished sample. Budgets are enforced here: a probe (a state not measured before) beyond
``max_probes``, or any step past ``max_wall_s``, raises ``BudgetExhausted``.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path

from agent.state import Hunt, Measured
from tools.catalog import ToolContext
from tools.host import Host, LocalHost
from tools.measure import MeasureCache, State, Workload
from tools.registry import ToolRecord, call
from tools.ssh import SSHHost
from transcripts.store import Store


class BudgetExhausted(RuntimeError):
    pass


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


class Runtime:
    def __init__(
        self, hunt: Hunt, run_dir: Path, on_event: Callable[[Hunt, str], None] | None = None, store: Store | None = None
    ) -> None:
        self.store = store
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        t = hunt.target
        self.host: Host = (
            LocalHost() if t.host is None else SSHHost(t.host, known_hosts=t.known_hosts, ssh_config=t.ssh_config)
        )
        self.ctx = ToolContext(
            t.repo,
            self.host,
            workdir=run_dir,
            cache=MeasureCache(run_dir / "measurements.json"),
            pid_dir=run_dir.parent / "servers",
        )  # shared by the store's runs
        self.workload = Workload(bench=t.workload, metric=t.metric, command=t.command)
        self.records: list[ToolRecord] = []
        self.on_event = on_event

    # -- tools ---------------------------------------------------------------------------------
    def tool(self, name: str, args: dict, approved: bool = False, hunt: Hunt | None = None) -> ToolRecord:
        if self.store is not None and hunt is not None:
            self.store.event(
                hunt.run_id, "tool_call", f"{name} {args}", {"name": name, "args": args, "approved": approved}
            )
        rec = call(name, args, self.ctx, approved=approved)
        self.records.append(rec)
        if self.store is not None and hunt is not None:
            text = f"{name}: {'ok' if rec.ok else rec.error}"
            self.store.event(hunt.run_id, "tool_result", text, rec.model_dump(mode="json"), rec.duration_s)
        return rec

    def say(self, hunt: Hunt, kind: str, text: str, payload: dict | None = None) -> None:
        hunt.log(kind, text)
        if self.store is not None:
            stored = STORE_KINDS.get(kind, "note")
            self.store.event(hunt.run_id, stored, text, {"phase": kind, **(payload or {})})
        if self.on_event is not None:
            self.on_event(hunt, text)

    def check_wall(self, hunt: Hunt) -> None:
        if time.time() - hunt.started_at > hunt.budget.max_wall_s:
            raise BudgetExhausted(f"wall-time budget of {hunt.budget.max_wall_s:.0f} s exhausted")

    # -- measurement ---------------------------------------------------------------------------
    def _is_new(self, state: State) -> bool:
        entry, _tree = self.ctx.measurer._entry(state, self.workload)
        return not entry["samples"]

    def _measured_states(self) -> int:
        """States with samples in this run's cache: it survives a SIGKILL, the in-memory count of
        the node that was running does not, so the cache is what counts."""
        return sum(1 for e in self.ctx.cache.data.values() if e["samples"])

    def _count_probe(self, hunt: Hunt, state: State) -> None:
        self.check_wall(hunt)
        done = self._measured_states()
        if self._is_new(state):
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
        sha = self.ctx.git.snapshot(paths) if ref == "WORKTREE" else self.ctx.git.rev_parse(ref)
        state = State(label=label, ref=sha, launch=with_env(launch or hunt.target.launch, env or {}))
        self._count_probe(hunt, state)
        self.say(hunt, "probe", f"measuring {label} ({sha[:10]})")
        m = self.ctx.measurer.measure(state, self.workload, samples or hunt.budget.samples)
        s = m.summary
        out = Measured(
            id=f"m{len(hunt.measurements) + 1}",
            label=label,
            ref=sha,
            env=env or {},
            launch=state.launch,
            samples=m.samples,
            median=s.median,
            ci_low=s.ci_low,
            ci_high=s.ci_high,
            cv=s.cv,
            verify_ms=sum(m.verify_ms) / len(m.verify_ms) if m.verify_ms else None,
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

    def probe_fn(self, hunt: Hunt, seen: dict[str, list[float]]):
        """A bisection probe that counts new states against the hunt's budget; the samples it hands
        out are collected in ``seen`` (sha -> samples) for the record."""
        inner = self.ctx.measurer.probe_fn(hunt.target.launch, self.workload)

        def probe(sha: str, n: int) -> list[float]:
            state = State(label="bisect", ref=sha, launch=hunt.target.launch)
            self._count_probe(hunt, state)  # BudgetExhausted ends the bisection (not a skip)
            self.say(hunt, "probe", f"bisect probe {sha[:10]} ({n} samples)")
            got = inner(sha, n)
            seen.setdefault(sha, []).extend(got)
            return got

        return probe

    def record_samples(self, hunt: Hunt, label: str, sha: str, samples: list[float]) -> None:
        """Add samples taken outside ``measure`` (bisection probes) to the hunt's measurements."""
        from tools.stats import summarize

        s = summarize(samples)
        hunt.measurements.append(
            Measured(
                id=f"m{len(hunt.measurements) + 1}",
                label=label,
                ref=sha,
                launch=hunt.target.launch,
                samples=samples,
                median=s.median,
                ci_low=s.ci_low,
                ci_high=s.ci_high,
                cv=s.cv,
            )
        )

    def close(self) -> None:
        self.host.close()
