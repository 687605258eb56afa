"""What the LLM policy's model may call, and how each call is checked and run.

The model sees JSON schemas generated from the pydantic argument models below:

- look: read-only git tools from the registry (status, log, reflog, diff --stat, show --stat,
  merge-base), ``nvidia_smi`` and ``server_info`` (the tuning variables the server's Python sees
  and the server args its log printed);
- measure: ``measure`` a state under a label, ``compare`` two measured states (an A/B that takes
  more samples while unclear), ``bisect`` a commit range;
- the ledger: ``state_hypothesis``, ``record_verdict`` (the graph checks the cited numbers),
  ``conclude``;
- ``shell``, only when ``--allow-shell`` names argv prefixes (e.g. ``"pip list"``).

There is no tool that changes the user's repository: landing a revert happens in the graph's
``apply`` node, after a person's approval, whatever the model says. Every call runs through the
hunt's ``Runtime`` (recorded, budgeted, replayable). A call that fails validation comes back to
the model as an error it can correct; ``ToolOutcome.valid`` says whether it counted.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from agent.categories.environment import launch_env, tuning_vars
from agent.categories.history import NothingExecutedChanged, bisect_history, subject_of
from agent.categories.uncommitted import server_args
from agent.experiments import ab, explains, min_effect_pct, setup_prefix
from agent.runtime import RecordedError, Runtime
from agent.state import Category, Hunt, Hypothesis, Measured
from tools.bisect import ProbeError
from tools.registry import REGISTRY
from tools.stats import compare
from tools.text import first_line
from tools.validation import first_error

LOOK = ("git_status", "git_log", "git_reflog", "git_diff_stat", "git_show_stat", "git_merge_base")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a conclusion's kind must rest on: the category of its supported hypothesis.
KIND_CATEGORY = {
    "commit": "history",
    "uncommitted": "uncommitted",
    "env": "environment",
    "config": "config",
    "hardware": "hardware",
    "dependency": "dependencies",
}


class ToolInputError(ValueError):
    """The call is not acceptable as asked; the message goes back to the model."""


# -- argument models ---------------------------------------------------------------------------
class NoArgs(BaseModel):
    pass


class MeasureArgs(BaseModel):
    label: str = Field(min_length=1, max_length=60, description="your name for this state, e.g. 'good', 'head'")
    ref: str = Field(default="HEAD", description="a commit-ish, or WORKTREE: HEAD plus the uncommitted changes")
    patches: list[str] | None = Field(
        default=None, description="with ref WORKTREE: only the uncommitted changes to these paths"
    )
    env: dict[str, str] = Field(default={}, description='variables set for the server ("" blanks one)')
    launch: Literal["current", "good"] = Field(default="current", description="the alert's launch or the good run's")
    samples: int | None = Field(default=None, ge=3, le=30, description="default: the hunt's budget")

    @field_validator("env")
    @classmethod
    def _names(cls, env: dict[str, str]) -> dict[str, str]:
        bad = [k for k in env if not ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"not a variable name: {bad[0]!r}")
        return env


class CompareArgs(BaseModel):
    a: str = Field(description="label or id of the reference state (e.g. the good one)")
    b: str = Field(description="label or id of the other state")


class BisectArgs(BaseModel):
    good: str = Field(description="a commit measured fast")
    bad: str = Field(default="HEAD", description="a commit measured slow")


class HypothesisArgs(BaseModel):
    category: Category
    statement: str = Field(min_length=3, max_length=500)
    test: str = Field(min_length=3, max_length=500, description="the measurement that could refute it")
    subject: str | None = Field(default=None, description="what it names: a path, VAR, flag or sha")


class VerdictArgs(BaseModel):
    id: str = Field(description="the hypothesis id, e.g. h2")
    status: Literal["supported", "refuted", "demoted", "inconclusive"]
    reason: str = Field(min_length=3, max_length=1000, description="the numbers, in words")
    evidence: list[str] = Field(default=[], description="labels or ids of the measurements it rests on")


# What a model may conclude: a kind its ledger can support, or "none". ``external`` is the
# graph's own verdict when every hypothesis is refuted but the drop is real, never a model's.
ConcludeKind = Literal["commit", "uncommitted", "env", "config", "dependency", "hardware", "none"]


class ConcludeArgs(BaseModel):
    kind: ConcludeKind
    ref: str | None = Field(default=None, description="the exact sha, path, VAR or flag (not for 'none')")
    also: list[str] = Field(default=[], description="further culprit commits, when several are needed")
    hypothesis: str | None = Field(default=None, description="the supported hypothesis it rests on")
    summary: str = Field(min_length=3, max_length=1000)


class ShellArgs(BaseModel):
    argv: list[str] = Field(min_length=1, max_length=50, description="program and arguments (no shell)")


@dataclass
class ToolOutcome:
    content: str  # what the model is shown
    valid: bool  # a call the graph accepted (errors of the world count; malformed calls do not)


def trim(text: str, limit: int) -> str:
    """Head and tail of a long output, with a note of what was cut in between."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} characters cut ...]\n{tail}"


class Surface:
    """The tools of one hunt's model, bound to its state and runtime."""

    def __init__(self, hunt: Hunt, rt: Runtime) -> None:
        self.hunt, self.rt = hunt, rt
        self.allow = [shlex.split(a) for a in (hunt.llm.allow_shell if hunt.llm else []) if a.strip()]
        self.own: dict[str, tuple[type[BaseModel], str, Callable[[Any], Any]]] = {
            "nvidia_smi": (NoArgs, "GPU clocks, power, PCIe link vs their maxima, throttle reasons.", self.nvidia_smi),
            "server_info": (
                NoArgs,
                "The tuning variables the server's environment holds and the server args it logged.",
                self.server_info,
            ),
            "measure": (MeasureArgs, "Measure a state (cached: a state is measured once).", self.measure),
            "compare": (
                CompareArgs,
                "A/B of two measured states: is the difference real and big enough?",
                self.compare,
            ),
            "bisect": (
                BisectArgs,
                "Bisect good..bad with noise-aware probes; returns the culprit commits.",
                self.bisect,
            ),
            "state_hypothesis": (HypothesisArgs, "Add a hypothesis to the ledger, with its test.", self.state),
            "record_verdict": (VerdictArgs, "Record a hypothesis' verdict with its evidence.", self.verdict),
            "conclude": (ConcludeArgs, "Name the root cause (the graph confirms it by A/B).", self.conclude),
        }
        if self.allow:
            self.own["shell"] = (
                ShellArgs,
                "Run a command on the host in the repository (allowed: "
                + ", ".join(" ".join(a) for a in self.allow)
                + ").",
                self.shell,
            )

    # -- the schemas the model sees ---------------------------------------------------------------
    def schemas(self) -> list[dict]:
        out = [REGISTRY[n].schema() for n in LOOK]
        for name, (model, doc, _fn) in self.own.items():
            params = model.model_json_schema()
            params.pop("title", None)
            out.append({"type": "function", "function": {"name": name, "description": doc, "parameters": params}})
        return out

    # -- one call ---------------------------------------------------------------------------------
    def run(self, name: str, arguments: Any, parse_error: str | None) -> ToolOutcome:
        limit = self.hunt.llm.output_chars if self.hunt.llm else 4000
        if name not in self.own and name not in LOOK:
            known = ", ".join([*LOOK, *self.own])
            return ToolOutcome(f"error: unknown tool '{name}'. The tools are: {known}", False)
        if parse_error is not None:
            return ToolOutcome(f"error: {parse_error}; send the arguments as one JSON object", False)
        if not isinstance(arguments, dict):
            return ToolOutcome("error: the arguments must be a JSON object", False)
        try:
            if name in LOOK:
                REGISTRY[name].args_model.model_validate(arguments)
                rec = self.rt.tool(name, arguments, hunt=self.hunt)
                result: Any = rec.result if rec.ok else {"error": rec.error}
            else:
                model, _doc, fn = self.own[name]
                result = fn(model.model_validate(arguments))
        except ValidationError as exc:
            return ToolOutcome(f"error: invalid arguments for {name}: {first_error(exc, '(arguments)')}", False)
        except ToolInputError as exc:
            return ToolOutcome(f"error: {exc}", False)
        except (ProbeError, RecordedError) as exc:  # the world's answer: valid call, failed probe
            return ToolOutcome(f"error: {first_line(exc)}", True)
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return ToolOutcome(trim(text, limit), True)

    # -- look -------------------------------------------------------------------------------------
    def nvidia_smi(self, _args: NoArgs) -> Any:
        rec = self.rt.tool("nvidia_smi", {"setup": setup_prefix(self.hunt)}, hunt=self.hunt)
        return rec.result if rec.ok else {"error": rec.error}

    def server_info(self, _args: NoArgs) -> dict:
        env = launch_env(self.hunt, self.rt)
        tuning = {k: env[k] for k in tuning_vars(env)}
        return {"tuning_env": tuning, "server_args": server_args(self.hunt, self.rt)}

    def shell(self, args: ShellArgs) -> dict:
        if not any(args.argv[: len(a)] == a for a in self.allow):
            allowed = "; ".join(" ".join(a) for a in self.allow)
            raise ToolInputError(f"'{' '.join(args.argv[:3])}' is not allowed (--allow-shell: {allowed})")
        argv, repo = args.argv, self.hunt.target.repo

        def live() -> dict:
            res = self.rt.host.run(argv, cwd=repo, timeout=120)
            return {"exit_code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr[-2000:]}

        return self.rt.observe(self.hunt, "host_run", {"argv": argv, "cwd": repo}, live)

    # -- measure ----------------------------------------------------------------------------------
    def _find(self, ref: str) -> Measured:
        """A measurement by id, or the latest one under a label."""
        for m in reversed(self.hunt.measurements):
            if ref in (m.id, m.label):
                return m
        labels = sorted({m.label for m in self.hunt.measurements})
        raise ToolInputError(f"no measurement '{ref}' (labels: {', '.join(labels) or 'none yet'})")

    def _show(self, m: Measured) -> dict:
        return {
            "id": m.id,
            "label": m.label,
            "ref": m.ref[:12],
            "median": round(m.median, 4),
            "ci95": [round(m.ci_low, 4), round(m.ci_high, 4)],
            "cv_pct": round(m.cv * 100, 2),
            "n": len(m.samples),
        }

    def measure(self, args: MeasureArgs) -> dict:
        h = self.hunt
        if args.patches is not None and args.ref != "WORKTREE":
            raise ToolInputError("patches: only with ref WORKTREE")
        if args.launch == "good" and not h.target.good_launch:
            raise ToolInputError("launch: the alert gives no good launch; use 'current'")
        launch = h.target.good_launch if args.launch == "good" else None
        m = self.rt.measure(
            h, args.label, args.ref, env=args.env, launch=launch, samples=args.samples, paths=args.patches
        )
        return self._show(m) | {"probes_used": h.probes, "probe_budget": h.budget.max_probes}

    def compare(self, args: CompareArgs) -> dict:
        h = self.hunt
        a, b = self._find(args.a), self._find(args.b)
        if a.id == b.id:
            raise ToolInputError("a and b are the same measurement")
        cmp, a, b = ab(h, self.rt, a, b, a.label, b.label, better="either")
        faster, slower = (a, b) if (a.median > b.median) == h.target.higher_is_better else (b, a)
        return {
            "a": self._show(a),
            "b": self._show(b),
            "delta_pct_b_vs_a": round(cmp.delta_pct, 2),
            "p_value": float(f"{cmp.p_value:.3g}"),
            "verdict": cmp.verdict,
            "better": faster.label,
            "explains_regression": explains(h, cmp, faster, slower),
            "smallest_effect_that_matters_pct": round(min_effect_pct(h), 2),
        }

    def bisect(self, args: BisectArgs) -> dict:
        """The bisection's culprits, each with the later commits (up to ``bad``) whose message
        says they revert it: a step undone there is history, not the cause at ``bad`` (the model
        is shown it, as ``history.at_head`` acts on it)."""
        h = self.hunt
        try:
            parents, res = bisect_history(h, self.rt, args.good, args.bad)
        except NothingExecutedChanged as exc:  # the model is told, as the methodical policy acts on it
            return {"commits": len(h.bisected), "culprits": [], "pruned": h.pruned, "finding": str(exc)}
        return {
            "commits": len(parents),
            "probes": res.probes,
            "samples": res.samples,
            "culprits": [
                {
                    "sha": c.sha,
                    "subject": subject_of(h, self.rt, c.sha),
                    "delta_pct_vs_parent": None if c.delta_pct is None else round(c.delta_pct, 2),
                    "reverted_later_by": self._reverts(c.sha, args.bad),
                }
                for c in res.culprits
            ],
        }

    def _reverts(self, sha: str, bad: str) -> list[str]:
        rec = self.rt.tool("git_reverts_of", {"sha": sha, "head": bad}, hunt=self.hunt)
        return [f"{r['sha'][:10]} {r['subject']}" for r in rec.result["commits"]] if rec.ok else []

    # -- the ledger -------------------------------------------------------------------------------
    def state(self, args: HypothesisArgs) -> dict:
        h = self.hunt
        if len(h.hypotheses) >= 40:
            raise ToolInputError("the ledger holds 40 hypotheses; record verdicts and conclude")
        hyp = Hypothesis(
            id=f"h{len(h.hypotheses) + 1}",
            category=args.category,
            statement=args.statement,
            test=args.test,
            subject=args.subject,
        )
        h.hypotheses.append(hyp)
        self.rt.say(h, "hypothesis", f"{hyp.id} [{hyp.category}] {hyp.statement} - test: {hyp.test}")
        return {"id": hyp.id}

    def verdict(self, args: VerdictArgs) -> dict:
        h = self.hunt
        hyp = next((x for x in h.hypotheses if x.id == args.id), None)
        if hyp is None:
            raise ToolInputError(f"id: no hypothesis '{args.id}' (ids: {', '.join(x.id for x in h.hypotheses)})")
        evidence = [self._find(e) for e in args.evidence]
        if args.status in ("supported", "refuted") and hyp.category != "hardware" and not evidence:
            raise ToolInputError("evidence: a supported or refuted verdict cites the measurements it rests on")
        if args.status == "supported" and hyp.category != "hardware":
            if len(evidence) < 2:
                raise ToolInputError("evidence: 'supported' needs the two measurements of its A/B")
            a, b = evidence[0], evidence[1]
            cmp = compare(a.samples, b.samples, min_effect_pct=min_effect_pct(h), interval=False)
            faster, slower = (a, b) if (a.median > b.median) == h.target.higher_is_better else (b, a)
            if not explains(h, cmp, faster, slower):
                raise ToolInputError(
                    f"the evidence does not support it: {a.label} {a.median:.4g} vs {b.label} {b.median:.4g} "
                    f"({cmp.delta_pct:+.1f}%, p={cmp.p_value:.2g}, {cmp.verdict}); compare them, or refute it"
                )
        hyp.status, hyp.reason, hyp.evidence = args.status, args.reason, [m.id for m in evidence]
        self.rt.say(h, "verdict", f"{hyp.id} {hyp.status}: {hyp.reason}")
        return {"id": hyp.id, "status": hyp.status}

    def conclude(self, args: ConcludeArgs) -> dict:
        h = self.hunt
        still = [x.id for x in h.hypotheses if x.status == "open"]
        if still:
            raise ToolInputError(f"record a verdict for {', '.join(still)} first")
        if args.kind != "none":
            if not args.ref:
                raise ToolInputError(f"ref: a '{args.kind}' conclusion names its exact reference")
            hyp = next((x for x in h.hypotheses if x.id == args.hypothesis), None)
            if hyp is None or hyp.status != "supported":
                raise ToolInputError("hypothesis: a conclusion rests on a supported hypothesis of the ledger")
            if KIND_CATEGORY[args.kind] != hyp.category:
                raise ToolInputError(
                    f"kind: '{args.kind}' does not follow from a {hyp.category} hypothesis "
                    f"(it needs a {KIND_CATEGORY[args.kind]} one)"
                )
        ref = args.ref
        if args.kind == "commit":
            shas = [self.rt.resolve(h, r) for r in [args.ref or "", *args.also]]
            h.culprits, ref = list(dict.fromkeys(shas)), shas[0]
        h.root_kind, h.root_ref, h.root_summary = args.kind, ref, args.summary
        h.conversation.concluded = True
        self.rt.say(h, "conclude", f"the model concludes: {args.kind} {ref or ''} - {args.summary}")
        return {"accepted": True, "next": "the graph confirms this by its own A/B, then asks a person"}
