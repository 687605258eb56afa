"""The verdict's contract (DESIGN.md, "The verdict"), as a model.

``agent.report.verdict`` builds the verdict from a hunt and validates it here before it is printed
(``--json``), stored (``runs/RUN/verdict.json``, the store's row) or served. The model is the one
source of the field descriptions: the documentation's reference page is generated from its JSON
Schema (``docs/hooks.py``), so a field added to the verdict without a description here fails
validation (``extra="forbid"`` at the top level) instead of going undocumented. Nested parts that
grow by design (the regression's numbers, the drop's shape) stay open objects.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.state import Category, Kind, Status
from tools.measure import Cost


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class VerdictTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: str = Field(description="the repository hunted (a path on its host)")
    host: str | None = Field(description="the SSH host it was hunted on; null for this machine")
    metric: str = Field(description="what was measured: tok_per_s, p99_ttft_ms, a benchmark's own key ...")
    higher_is_better: bool = Field(description="which way the metric is better")


class RootCause(_Open):
    kind: Kind = Field(
        description="commit, uncommitted (a patch in the working tree), env (a variable), config (a "
        "launch flag), dependency (a package), hardware, multiple (several causes: root_causes), "
        "external (a real drop nothing in reach explains) or none (no drop beyond noise, only that)"
    )
    ref: str = Field(description="what it names: a full SHA, a path, VAR, a flag, a package, an nvidia-smi field")
    summary: str = Field(description="one line a person reads: the cause, its numbers")
    evidence: str | None = Field(
        None, description="how strong the proof is: proven (a fresh A/B), likely (bisected, not confirmed) ..."
    )
    p_value: float | None = Field(None, description="the confirming A/B's p-value")
    p_corrected: float | None = Field(None, description="p_value corrected for the number of tests the hunt ran")
    tests: int | None = Field(None, description="how many tests the hunt ran (the correction's n)")


class CauseShare(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str | None = Field(description="as root_cause.kind")
    ref: str | None = Field(description="as root_cause.ref")
    summary: str | None = Field(description="one line")
    share_pct: float | None = Field(
        description="this cause's share of the drop, percent, as ratios: |log(A/B)| of its own A/B over "
        "|log(good/bad)| of the drop"
    )
    action: Any = Field(None, description="the fix proposed for this cause")


class HypothesisRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="h1, h2, ... in the order stated")
    category: Category = Field(description="the ledger's category")
    statement: str = Field(description="the hypothesis, stated before its test ran")
    status: Literal["open", "supported", "refuted", "inconclusive"] = Field(
        description="the test's verdict; open: not tested (the budget ended first, or its reason says why)"
    )
    demoted: bool = Field(description="refuted by a reading, not a measurement (e.g. a file on an unused code path)")
    reason: str = Field(description="why: the numbers")
    evidence: list[str] = Field(description="ids of the measurements that decided it")


class ProposedAction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["revert", "unset", "restore", "pin", "investigate"] = Field(
        description="revert a commit, unset a variable, restore a flag or file, pin a package, or "
        "investigate (nothing to approve: a person must look)"
    )
    ref: str | None = Field(description="what the action applies to")
    status: Literal["pending", "approved", "rejected", "applied"] = Field(description="where the approval stands")
    branch: str | None = Field(
        description="the branch an approved revert landed on, or will (sleuth/revert-SHA10); null once rejected"
    )
    revert_sha: str | None = Field(description="the prepared revert commit (no ref moved before approval)")
    detail: str = Field(description="what a person runs or reads")
    reason: str | None = Field(
        None, description="why the person approved or rejected it, as they said it; null while pending"
    )


class Verdict(BaseModel):
    """What a hunt concluded: ``sleuth hunt --json``, ``runs/RUN/verdict.json``, the page's JSON."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = Field(description="the run in the store (sleuth show RUN)")
    status: Status = Field(
        description="concluded, awaiting_approval (a fix waits for a person), inconclusive (the budget "
        "named in summary ended it, or the evidence did not decide), failed, running"
    )
    target: VerdictTarget = Field(description="what was hunted")
    summary: str = Field(description="the one line, whatever the status")
    root_cause: RootCause | None = Field(description="the cause named; null when none was")
    root_causes: list[CauseShare] = Field(description="kind multiple: every cause with its share of the drop")
    regression: dict[str, Any] = Field(
        description="the drop: metric, good, bad, delta_pct, p_value; explained_pct (the named cause's "
        "share, as share_pct) and residual when it recovers only part of it; broken when HEAD does not serve"
    )
    hypotheses: list[HypothesisRow] = Field(description="the ledger, every row")
    probes: int = Field(description="measurements taken (A/B sides and bisection probes)")
    proposed_action: ProposedAction | None = Field(description="the fix a person approves; null when none")
    culprits: list[str] = Field(description="the commits the bisection named (full SHAs)")
    shape: dict[str, Any] | None = Field(
        description="the drop's shape over the bisected range: one step, steps or gradual, each step's share"
    )
    after: dict[str, Any] | None = Field(
        description="the approved fix re-measured beside HEAD on fresh launches: median, ci_low, ci_high, "
        "measurement; before_median, before_measurement, delta_pct, p_value, verdict (that A/B); "
        "recovered_pct_of_drop; or error with measurement null"
    )
    cost: Cost = Field(description="launches, samples, device, build, launch and sample seconds, waits for busy GPUs")
    broken: list[dict[str, Any]] = Field(
        description="states that did not build, serve or run their benchmark command: label, ref, how, failure, log"
    )
    pruned: list[dict[str, Any]] = Field(description="commits not bisected (sha, reason): they touch no executed file")
    undone: list[dict[str, Any]] = Field(description="steps a later commit reverted: history, not the cause at HEAD")
    error: str | None = Field(description="what stopped a failed or inconclusive hunt, in one line")
    bad_flag: str | None = Field(
        None,
        description="the input that made the hunt impossible, as the flag that gave it: --bench when the "
        "benchmark yields no number at HEAD nor at the good ref (error says why); null otherwise",
    )
    policy: str = Field(description="methodical, bisect-only or llm")
    llm: dict[str, Any] | None = Field(description="the LLM policy's model, turns and tokens; null otherwise")


def action_of(row: dict) -> str:
    """What a run proposed and where a person stands on it, in two words ("revert approved",
    "restore rejected", "revert pending"; "investigate": nothing to approve), from its verdict:
    the run's status says "concluded" for an approved and a rejected run alike."""
    try:
        action = (json.loads(row.get("verdict") or "null") or {}).get("proposed_action") or {}
    except (TypeError, ValueError, AttributeError):
        return ""
    kind, status = action.get("kind") or "", action.get("status") or ""
    if kind in ("", "none"):
        return ""
    if row.get("eval_set") and status == "pending":  # scored, its world removed: nothing to approve
        return f"{kind} not applied (evaluation)"
    return kind if kind == "investigate" else f"{kind} {status}".strip()
