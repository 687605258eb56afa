"""The triage graph (LangGraph): what no policy may skip is enforced here.

    intake -> reproduce -> plan -> investigate (loop: one hypothesis, its test, its verdict)
           -> localize -> confirm -> propose -> approval (interrupt) -> apply -> verify -> report

The state is the ``Hunt`` model as plain JSON (checkpointed in SQLite after every node, thread id
= run id), so ``sleuth approve RUN`` resumes in another process, hours later. Budgets are checked
on every probe; running out ends the hunt as ``inconclusive`` with what was learned. The only
``mutate`` tool (landing the revert) runs in ``apply``, a node reached only through the approval
interrupt; the node that asks re-runs on resume, so it has no side effects of its own.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel

from agent import evidence
from agent.experiments import fmt, fresh_ab, freshness
from agent.multiple import fraction, the_drop
from agent.policy import get_policy
from agent.report import verdict, write_report
from agent.runtime import RESUMED, BudgetExhausted, RecordedError, Runtime, time_paused
from agent.state import INPUT_FIELDS, Hunt
from tools.bisect import ProbeError
from tools.host import HostError
from tools.text import first_line
from transcripts.cassette import Cassette, EventChecker, ReplayStop, Resumption
from transcripts.lease import RunLease
from transcripts.store import Store, StoreUnavailable, layout, run_command, unavailable


class HostLost(RuntimeError):
    """The hunt's host stopped answering mid-hunt: the run stops at its last checkpoint (the step
    in flight is measured again) and ``sleuth resume RUN`` continues it once the host answers."""

    def __init__(self, run_id: str, reason: str, resume: str) -> None:
        super().__init__(f"host: {reason}; run {run_id} stopped at its last checkpoint: `{resume}` once it answers")
        self.run_id, self.reason = run_id, reason


WEAK_STEP_PCT = 50.0  # an unconfirmed candidate whose own step is less of the drop than this is not named


def _drop_weak_candidate(hunt: Hunt) -> str | None:
    """A budget that stops a hunt before its bisection's candidate was confirmed leaves that
    candidate named only if its own step (culprit^ to culprit, ``evidence.steps``) carries at
    least half of the drop. A trial's hunt on a loaded machine was stopped mid-confirmation and
    named a wrong commit "likely" whose own step was 12 % of the drop. The candidate is said, not
    named: what to say, or None where the named cause stands."""
    if hunt.root_kind != "commit" or not hunt.root_ref or hunt.confirmation.get("ok"):
        return None
    found = {s["ref"]: s["share_pct"] for s in (evidence.steps(hunt) or {}).get("steps", [])}
    share = found.get(hunt.root_ref)
    if share is None or share >= WEAK_STEP_PCT:
        return None
    said = (
        f"the bisection's candidate {hunt.root_ref[:10]} was not confirmed, and its own step is {share:.0f}% of "
        "the drop: not named"
    )
    hunt.root_kind, hunt.root_ref, hunt.culprits, hunt.root_summary = None, None, [], ""
    return said


class GraphState(TypedDict):
    hunt: dict


class Decision(BaseModel):
    """A person's answer to the approval interrupt."""

    approved: bool
    reason: str = ""
    branch: str | None = None


class Hunter:
    """Builds the compiled graph for a checkpoint DB and a runs dir; keeps one Runtime per run."""

    def __init__(
        self,
        db: Path,
        runs_dir: Path,
        on_event: Callable[[Hunt, str], None] | None = None,
        store: Store | EventChecker | None = None,
        saver: BaseCheckpointSaver | None = None,
        cassette: Cassette | None = None,
    ) -> None:
        """A replay passes its own store (an ``EventChecker`` for a strict one), an in-memory
        saver and the cassette; a hunt gets the SQLite files beside ``db``."""
        self.db, self.runs_dir, self.on_event, self.cassette = db, runs_dir, on_event, cassette
        db.parent.mkdir(parents=True, exist_ok=True)
        # LangGraph's checkpoints beside the transcript store, in a file of their own: two writers on
        # one SQLite file would wait on each other's locks.
        self.saver = saver or SqliteSaver(sqlite3.connect(str(layout(db).checkpoints), check_same_thread=False))
        self.store = store if store is not None else Store(db)
        self.runtimes: dict[str, Runtime] = {}
        self.leases: dict[str, RunLease] = {}
        self.resuming: dict[str, Resumption] = {}  # runs continued after their driver died
        self.app = self._build().compile(checkpointer=self.saver)

    def lease(self, run_id: str) -> None:
        """Take the lease on ``run_id`` (``transcripts.lease``) for as long as this Hunter lives:
        raises ``RunBusy`` while another live process drives the run. Every way into the graph
        that advances a run takes it first."""
        if run_id not in self.leases:
            self.leases[run_id] = RunLease(self.run_dir(run_id), run_id).acquire()

    def elapsed(self, hunt: Hunt) -> float:
        """Seconds the hunt has run, the time it lay dead between drivers left out (what its wall
        budget counts: ``Runtime.budget_start``)."""
        rt = self.runtimes.get(hunt.run_id)
        return time.time() - (rt.budget_start(hunt) if rt is not None else hunt.started_at)

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def runtime(self, hunt: Hunt) -> Runtime:
        if hunt.run_id not in self.runtimes:
            cassette = self.cassette or self.resuming.pop(hunt.run_id, None)
            self.runtimes[hunt.run_id] = Runtime(
                hunt, self.run_dir(hunt.run_id), self.on_event, self.store, cassette=cassette
            )
        return self.runtimes[hunt.run_id]

    def close(self) -> None:
        for rt in self.runtimes.values():
            rt.close()
        for lease in self.leases.values():
            lease.release()
        self.leases.clear()
        if isinstance(self.saver, SqliteSaver):
            self.saver.conn.close()
        self.store.close()

    # -- nodes -------------------------------------------------------------------------------
    def _node(self, fn: Callable[[Hunt, Runtime], None], phase: str):
        def run(state: GraphState) -> GraphState:
            hunt = Hunt.model_validate(state["hunt"])
            if hunt.status in ("inconclusive", "failed"):
                return {"hunt": hunt.model_dump(mode="json")}
            hunt.phase = phase
            rt = self.runtime(hunt)
            try:
                fn(hunt, rt)
            except ReplayStop:
                raise  # the replay's finding, not the hunt's failure
            except BudgetExhausted as exc:
                hunt.status, hunt.error = "inconclusive", str(exc)
                weak = _drop_weak_candidate(hunt)
                # The run's one line (``sleuth runs``, the report, the service's list) says which
                # budget stopped it: alone, or after what was named before it ran out.
                stopped = f"stopped: {exc}"
                if weak:
                    hunt.root_summary = f"{stopped}; {weak}"
                elif not hunt.root_summary:
                    hunt.root_summary = stopped
                elif str(exc) not in hunt.root_summary:
                    hunt.root_summary += f"; {stopped}"
                rt.say(hunt, "budget", str(exc))
            except Exception as exc:
                store_down = unavailable(exc, self.store.path)
                if store_down is not None:
                    # The store (or the disk under it), not the hunt: stop at the last checkpoint,
                    # resumable, instead of writing a "failed" that could not be written anyway.
                    raise store_down from exc
                if isinstance(exc, HostError) or (isinstance(exc, RecordedError) and exc.kind == "HostError"):
                    # The host stopped answering (a dropped link, sshd restarted): not the hunt's
                    # failure either. Its worktrees there are cleaned by the next start.
                    lost = self._host_lost(hunt.run_id, exc)
                    rt.say(hunt, "error", str(lost))
                    raise lost from exc
                hunt.status = "failed"
                kind = exc.kind if isinstance(exc, RecordedError) else type(exc).__name__
                hunt.error = f"{kind}: {first_line(str(exc))}"
                rt.run_dir.mkdir(parents=True, exist_ok=True)
                (rt.run_dir / "error.txt").write_text(traceback.format_exc())
                rt.say(hunt, "error", hunt.error)
            if hunt.hypotheses:
                self.store.put_hypotheses(hunt.run_id, [h.model_dump() for h in hunt.hypotheses])
            if rt.last_seq is not None:
                hunt.seq = rt.last_seq  # the checkpoint's place in the transcript (a resumption starts there)
            return {"hunt": hunt.model_dump(mode="json")}

        return run

    @staticmethod
    def _intake(hunt: Hunt, rt: Runtime) -> None:
        hunt.head_sha = rt.resolve(hunt, "HEAD")
        rt.say(hunt, "intake", hunt.target.summary or f"hunting {hunt.target.metric} on {hunt.target.repo}")

    @staticmethod
    def _investigate(hunt: Hunt, rt: Runtime) -> None:
        get_policy(hunt.policy).investigate(hunt, rt)

    @staticmethod
    def _confirm(hunt: Hunt, rt: Runtime) -> None:
        policy = get_policy(hunt.policy)
        if not policy.confirm(hunt, rt):
            policy.confirm_failed(hunt, rt)  # self-correction: back to the ledger (or the model)

    @staticmethod
    def _propose(hunt: Hunt, rt: Runtime) -> None:
        get_policy(hunt.policy).propose(hunt)
        if hunt.action is not None and hunt.action.kind in ("revert", "unset", "restore", "pin"):
            hunt.status = "awaiting_approval"
            rt.say(hunt, "propose", f"proposed: {hunt.action.detail} - waiting for approval")
        else:
            hunt.status = "concluded"

    def _approval(self, state: GraphState) -> GraphState:
        hunt = Hunt.model_validate(state["hunt"])
        answer = interrupt(
            {
                "run_id": hunt.run_id,
                "action": hunt.action.model_dump() if hunt.action else None,
                "root_cause": hunt.root_summary,
            }
        )
        decision = Decision.model_validate(answer)
        assert hunt.action is not None
        hunt.action.status = "approved" if decision.approved else "rejected"
        hunt.action.reason = decision.reason
        if decision.branch:
            hunt.action.branch = decision.branch
        hunt.status = "running" if decision.approved else "concluded"
        hunt.log("approval", f"{hunt.action.status}: {decision.reason}")
        hunt.seq = self.store.event(
            hunt.run_id, "approval", f"{hunt.action.status}: {decision.reason}", decision.model_dump()
        )
        return {"hunt": hunt.model_dump(mode="json")}

    @staticmethod
    def _apply(hunt: Hunt, rt: Runtime) -> None:
        a = hunt.action
        if a is None or a.status != "approved":
            return
        if a.kind == "revert":
            rec = rt.tool(
                "git_land_revert", {"plan": hunt.confirmation["plan"], "branch": a.branch}, approved=True, hunt=hunt
            )
            if not rec.ok:
                raise RuntimeError(rec.error)
            a.branch, a.status = rec.result["branch"], "applied"
            rt.say(hunt, "apply", f"revert landed on branch {a.branch}")
        else:
            rt.say(hunt, "apply", f"approved; to do by hand: {a.detail}")

    @staticmethod
    def _verify(hunt: Hunt, rt: Runtime) -> None:
        """Re-measure an applied revert as a fresh experiment: the state the confirmation called
        HEAD against the revert commit that landed, both on servers launched for it, no sample
        reused (before, the branch's samples were pooled with the confirmation's and set against
        "now" as measured at the start: a trial read "117 % of the drop recovered"). The landed
        commit is measured by its SHA: a branch name a tag shadows resolved to HEAD ("0 %
        recovered"). The share recovered is the A/B's, as the confirmation's own share is
        (``multiple.fraction`` over ``multiple.the_drop``), so the two compare."""
        a = hunt.action
        if a is None or a.status != "applied" or a.kind != "revert":
            return
        head = next((m for m in reversed(hunt.measurements) if m.label == "HEAD"), None)
        again = head.model_copy(update={"label": "HEAD, re-measured"}) if head else ("HEAD, re-measured", "HEAD")
        landed = (hunt.confirmation.get("plan") or {}).get("revert_sha")  # the commit the branch was made at
        fixed = ("after-revert", landed or a.revert_sha or a.branch)
        try:
            cmp, was, after = fresh_ab(hunt, rt, again, fixed, hunt.budget.samples)
        except ProbeError as exc:  # the applied branch does not build, serve or run: say so, with why
            why = first_line(exc)
            hunt.after = {"error": why, "measurement": None}
            rt.say(hunt, "verify", f"after the revert: not re-measured ({why})")
            return
        ends = the_drop(hunt)
        rec = round(fraction(after.median, was.median, *ends, signed=True) * 100, 1) if ends else None
        hunt.after = {
            "median": after.median,
            "ci_low": after.ci_low,
            "ci_high": after.ci_high,
            "recovered_pct_of_drop": rec,
            "measurement": after.id,
            "before_median": was.median,
            "before_measurement": was.id,
            "delta_pct": cmp.delta_pct,
            "p_value": cmp.p_value,
            "verdict": cmp.verdict,
        }
        text = fmt(cmp, was, after, hunt.target.metric) + freshness(was, after)
        share = f": {rec:.0f}% of the drop recovered" if rec is not None else ""
        rt.say(hunt, "verify", f"after the revert: {text}{share}")

    def _report(self, hunt: Hunt, rt: Runtime) -> None:
        if hunt.status == "running":
            hunt.status = "concluded"
        write_report(hunt, rt.run_dir)
        self.record_end(hunt)

    def record_end(self, hunt: Hunt) -> None:
        """The run's row: status, root cause and the verdict JSON (also while awaiting approval)."""
        self.store.update_run(
            hunt.run_id,
            status=hunt.status,
            ended=time.time(),
            root_kind=hunt.root_kind,
            root_ref=hunt.root_ref,
            root_summary=hunt.root_summary,
            probes=hunt.probes,
            verdict=json.dumps(verdict(hunt)),
            **(
                {"tokens_in": hunt.conversation.tokens_in, "tokens_out": hunt.conversation.tokens_out}
                if hunt.llm is not None
                else {}
            ),
        )

    # -- routing -----------------------------------------------------------------------------
    @staticmethod
    def _ended(state: GraphState) -> bool:
        return state["hunt"]["status"] in ("inconclusive", "failed", "concluded")

    def _after_reproduce(self, state: GraphState) -> str:
        return "report" if self._ended(state) else "plan"

    def _investigating(self, state: GraphState) -> bool:
        return get_policy(state["hunt"]["policy"]).investigating(Hunt.model_validate(state["hunt"]))

    def _after_investigate(self, state: GraphState) -> str:
        if self._ended(state):
            return "report"
        return "investigate" if self._investigating(state) else "localize"

    def _after_localize(self, state: GraphState) -> str:
        return "report" if self._ended(state) else "confirm"

    def _after_confirm(self, state: GraphState) -> str:
        if self._ended(state):
            return "report"
        h = state["hunt"]
        if h["root_kind"] is None:  # confirmation failed: back to the investigation, or the ledger's other leads
            if self._investigating(state):
                return "investigate"
            return "localize" if any(x["status"] == "supported" for x in h["hypotheses"]) else "report"
        return "propose"

    def _after_propose(self, state: GraphState) -> str:
        return "approval" if state["hunt"]["status"] == "awaiting_approval" else "report"

    def _build(self) -> StateGraph:
        g = StateGraph(GraphState)
        g.add_node("intake", self._node(self._intake, "intake"))
        g.add_node("reproduce", self._node(lambda h, rt: get_policy(h.policy).reproduce(h, rt), "reproduce"))
        g.add_node("plan", self._node(lambda h, rt: get_policy(h.policy).plan(h, rt), "plan"))
        g.add_node("investigate", self._node(self._investigate, "investigate"))
        g.add_node("localize", self._node(lambda h, rt: get_policy(h.policy).localize(h, rt), "localize"))
        g.add_node("confirm", self._node(self._confirm, "confirm"))
        g.add_node("propose", self._node(self._propose, "propose"))
        g.add_node("approval", self._approval)
        g.add_node("apply", self._node(self._apply, "apply"))
        g.add_node("verify", self._node(self._verify, "verify"))
        g.add_node("report", self._node(self._report, "report"))
        g.add_edge(START, "intake")
        g.add_conditional_edges("intake", lambda s: "report" if self._ended(s) else "reproduce")
        g.add_conditional_edges("reproduce", self._after_reproduce)
        g.add_conditional_edges("plan", lambda s: "report" if self._ended(s) else "investigate")
        g.add_conditional_edges("investigate", self._after_investigate)
        g.add_conditional_edges("localize", self._after_localize)
        g.add_conditional_edges("confirm", self._after_confirm)
        g.add_conditional_edges("propose", self._after_propose)
        g.add_edge("approval", "apply")
        g.add_edge("apply", "verify")
        g.add_edge("verify", "report")
        g.add_edge("report", END)
        return g

    # -- driving -----------------------------------------------------------------------------
    @staticmethod
    def config(run_id: str) -> dict:
        return {"configurable": {"thread_id": run_id}, "recursion_limit": 200}

    def start(
        self, hunt: Hunt, scenario: str | None = None, spec: str | None = None, parent_run: str | None = None
    ) -> Hunt:
        """Run a new hunt to its end or to the approval interrupt. The run row keeps what a replay
        needs to start the same hunt again: its input (target, budget, policy) and, for a lab
        scenario, the spec it was built from (``scenario`` is the built dir)."""
        self.lease(hunt.run_id)
        built = {}
        if scenario:  # a lab build: its launch scale too, so a replay rebuilds it alike
            from evals.lab.builder import built_launch_scale  # the lab is the world side

            if (scale := built_launch_scale(scenario)) is not None:
                built["launch_scale"] = scale
        self.store.start_run(
            hunt.run_id,
            kind="replay" if parent_run else "hunt",
            policy=hunt.policy,
            model=hunt.model,
            target=hunt.target.repo + (f" on {hunt.target.host}" if hunt.target.host else ""),
            scenario=scenario,
            spec=spec,
            parent_run=parent_run,
            input=hunt.model_dump_json(include=INPUT_FIELDS),
            **built,
        )
        return self._drive(hunt.run_id, {"hunt": hunt.model_dump(mode="json")})

    def resume(self, run_id: str, decision: Decision) -> Hunt:
        from langgraph.types import Command

        self.lease(run_id)
        return self._drive(run_id, Command(resume=decision.model_dump()))

    def continue_run(self, run_id: str) -> Hunt:
        """Continue a run that died (SIGKILL, a crash, a store that could not be written) from its
        last checkpoint; the node that was running starts again, and every measurement it had
        finished comes from the cache."""
        self.lease(run_id)
        hunt = self.current(run_id)
        if hunt.seq is not None and self.cassette is None:  # (runs checkpointed before ``seq`` was kept: all live)
            self.resuming[run_id] = Resumption(self.store.events(run_id), hunt.seq)
        if self.cassette is None:
            try:
                self.runtime(hunt).reclaim()  # the dead driver's servers and worktrees, before anything else
            except HostError as exc:  # the host still does not answer: the run waits, as it did
                raise self._host_lost(run_id, exc) from exc
        self.store.event(run_id, "note", RESUMED, {"phase": "resume"})
        if run_id in self.runtimes:  # made before this note (to reclaim): the pause it ends counts too
            self.runtimes[run_id].paused_s = time_paused(self.store.events(run_id))
        self.store.update_run(run_id, status="running")  # an interrupted run's row says so until now
        return self._drive(run_id, None)

    def record_ended(self, run_id: str) -> Hunt:
        """Record the end of a run whose graph finished while its store could not be written."""
        return self._drive(run_id, None, run_graph=False)

    def _drive(self, run_id: str, graph_input: Any, run_graph: bool = True) -> Hunt:
        """Run the graph from ``graph_input`` to its end or the approval interrupt, and record the
        end. A store that cannot be written (``StoreUnavailable``) stops the run where its last
        checkpoint is: the run's row says ``failed`` with the reason where it can still be
        written, ``store-error.txt`` beside the run says it too, and the error goes up."""
        try:
            if run_graph:
                self.app.invoke(graph_input, self.config(run_id), durability="sync")
            result = self.current(run_id)
            self.record_end(result)
            if (self.store.run(run_id) or {}).get("error"):  # a store failure this run has got over
                self.store.update_run(run_id, error=None)
        except Exception as exc:
            down = unavailable(exc, self.store.path)
            if down is None:
                raise
            self._stopped(run_id, down)
            raise down from exc
        return result

    def _host_lost(self, run_id: str, exc: Exception) -> HostLost:
        """The run's host stopped answering: why, and the command that continues the run."""
        return HostLost(run_id, first_line(str(exc)), run_command("resume", run_id, self.store.path))

    def _stopped(self, run_id: str, down: StoreUnavailable) -> None:
        """Say, where anything can still be written, why the run stopped and how it goes on."""
        resume = run_command("resume", run_id, self.store.path)
        why = f"store: {down} (stopped at its last checkpoint; `{resume}` once it is writable)"
        with contextlib.suppress(Exception):
            self.store.update_run(run_id, status="failed", error=why)
        with contextlib.suppress(OSError):
            self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
            (self.run_dir(run_id) / "store-error.txt").write_text(why + "\n")

    def current(self, run_id: str) -> Hunt:
        snap = self.app.get_state(self.config(run_id))
        if not snap.values:
            raise KeyError(run_id)
        return Hunt.model_validate(snap.values["hunt"])

    def has_checkpoint(self, run_id: str) -> bool:
        try:
            self.current(run_id)
        except Exception:  # none stored, or the checkpoint store cannot be read either
            return False
        return True

    def pending(self, run_id: str) -> bool:
        return bool(self.app.get_state(self.config(run_id)).interrupts)
