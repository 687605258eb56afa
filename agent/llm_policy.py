"""The LLM policy: any OpenAI-compatible model drives the investigation through tool calling.

The graph is the methodical policy's: the regression is reproduced first (by measurement, not by
the model), then each ``investigate`` step is one model turn - its tool calls run through the
``Surface`` (agent/llm_tools.py) and their results go back as tool messages - until the model
calls ``conclude``. Then the graph, not the model, confirms the conclusion with its own A/B
(HEAD vs the culprit reverted; the variable unset; the patch left out; the good flags) and
proposes the action that needs a person's approval. A conclusion that fails its A/B goes back to
the model with the numbers (the self-correction), twice at most.

What the graph enforces whatever the model does: budgets (model turns, tokens, probes, wall time:
running out ends the hunt ``inconclusive``), the ledger (no conclusion while a hypothesis is
open; a "supported" verdict must cite an A/B that shows it), no mutating tool at all, and a
bounded number of replies in a row without a valid tool call. An endpoint that keeps failing
ends the run ``inconclusive`` with the error, never a traceback.

The model is shown the system prompt (agent/system_prompt.md), the alert and the reproduction,
and the conversation so far; when that outgrows ``context_chars`` the oldest turns are folded
into a summary of the ledger (refuted hypotheses in one line each) and the measurements.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.categories.uncommitted import changed_files
from agent.experiments import ab, explains, fmt, record_confirmation, record_outcome
from agent.llm_tools import Surface, trim
from agent.policy import Methodical, confirm, propose
from agent.runtime import BudgetExhausted, RecordedError, Runtime
from agent.state import Hunt, LLMSettings
from tools.bisect import ProbeError
from tools.text import first_line

SYSTEM_PROMPT = Path(__file__).with_name("system_prompt.md")
MAX_FAILED_CONFIRMATIONS = 2


def intake_message(hunt: Hunt) -> str:
    """The first user message: the alert, the target, the reproduction, the budgets."""
    t, r, b = hunt.target, hunt.regression, hunt.budget
    now = hunt.get(hunt.reproduced) if hunt.reproduced else None
    values = ", ".join(
        f"{name} value {v:g}" for name, v in (("good", t.good_value), ("alerting", t.bad_value)) if v is not None
    )
    lines = [
        f"Alert: {t.summary or 'a performance regression'}",
        f"Metric: {t.metric} ({'higher' if t.higher_is_better else 'lower'} is better); "
        + (f"{values}." if values else "no good or alerting value was given."),
        f"Repository: {t.repo}" + (f" on host {t.host}" if t.host else "") + ".",
    ]
    if t.good_ref:
        lines.append(f"The alert names a known-good ref: {t.good_ref}.")
    if t.good_launch and t.good_launch != t.launch:
        lines.append("The good run used a different launch command (measure it with launch 'good').")
    if now is not None:
        lines.append(
            f"Reproduced: the working tree measures {now.median:.4g} {t.metric} "
            f"(95% CI [{now.ci_low:.4g}, {now.ci_high:.4g}], {len(now.samples)} samples, noise CV "
            f"{now.cv * 100:.1f}%)"
            + (
                f", {r['delta_pct']:+.1f}% against the good value. "
                if r.get("delta_pct") is not None
                else "; with no good value, the drop is what the known-good ref measures against it. "
            )
            + f"It is measurement '{now.id}', label 'now'."
        )
    lines.append(
        f"Budgets: {b.max_probes} probes (measured states), {hunt.llm.max_turns if hunt.llm else '?'} turns. "
        "State your hypotheses, test them, record the verdicts, conclude."
    )
    return "\n".join(lines)


def ledger_summary(hunt: Hunt) -> str:
    """A compact account of what is known, for when old turns no longer fit the context."""
    lines = ["Earlier turns were folded to fit the context. What is known so far:"]
    refuted = [h for h in hunt.hypotheses if h.status in ("refuted", "demoted")]
    if refuted:
        lines.append("Refuted (do not test again):")
        lines += [f"- {h.id} [{h.category}] {h.statement}: {trim(h.reason, 160)}" for h in refuted]
    rest = [h for h in hunt.hypotheses if h.status not in ("refuted", "demoted")]
    if rest:
        lines.append("Other hypotheses:")
        lines += [f"- {h.id} [{h.category}] {h.status}: {h.statement} ({trim(h.reason, 160)})" for h in rest]
    if hunt.measurements:
        lines.append("Measurements (id label ref median n):")
        lines += [f"- {m.id} {m.label} {m.ref[:10]} {m.median:.4g} n={len(m.samples)}" for m in hunt.measurements]
    return "\n".join(lines)


def _size(messages: list[dict]) -> int:
    return sum(len(json.dumps(m, default=str)) for m in messages)


def fit_context(hunt: Hunt, limit: int) -> list[dict]:
    """The request's messages: the system prompt and intake, then as many of the latest turns as
    fit in ``limit`` characters; what was dropped is replaced by ``ledger_summary``. A turn (an
    assistant message with its tool results) is kept or dropped whole."""
    msgs = hunt.conversation.messages
    head, body = msgs[:2], msgs[2:]
    if _size(msgs) <= limit:
        return list(msgs)
    turns: list[list[dict]] = []
    for m in body:
        if m["role"] == "tool" and turns:
            turns[-1].append(m)
        else:
            turns.append([m])
    summary = {"role": "user", "content": ledger_summary(hunt)}
    kept: list[list[dict]] = []
    budget = limit - _size(head) - _size([summary])
    for turn in reversed(turns):
        if kept and _size(turn) > budget:
            break
        kept.insert(0, turn)
        budget -= _size(turn)
    return [*head, summary, *[m for t in kept for m in t]]


class LLMPolicy(Methodical):
    name = "llm"

    def plan(self, hunt: Hunt, rt: Runtime) -> None:
        if hunt.llm is None or not hunt.model:
            raise ValueError("the llm policy needs a model (--model)")
        hunt.conversation.messages = [
            {"role": "system", "content": SYSTEM_PROMPT.read_text()},
            {"role": "user", "content": intake_message(hunt)},
        ]
        rt.say(hunt, "plan", f"the model {hunt.model} takes over the investigation")

    def investigating(self, hunt: Hunt) -> bool:
        return not hunt.conversation.concluded

    def investigate(self, hunt: Hunt, rt: Runtime) -> None:
        """One model turn: ask, run its tool calls, hand the results back."""
        c, s = hunt.conversation, hunt.llm
        assert s is not None
        if c.turns >= s.max_turns:
            raise BudgetExhausted(f"model-turn budget of {s.max_turns} exhausted")
        if c.tokens >= s.max_tokens:
            raise BudgetExhausted(f"token budget of {s.max_tokens:,} exhausted ({c.tokens:,} used)")
        rt.check_wall(hunt)
        surface = Surface(hunt, rt)
        try:
            reply = rt.chat(hunt, fit_context(hunt, s.context_chars), surface.schemas())
        except RecordedError as exc:
            if exc.kind != "LLMError":
                raise
            hunt.status, hunt.error = "inconclusive", f"the model's endpoint failed: {exc}"
            rt.say(hunt, "error", hunt.error)
            return
        c.turns += 1
        c.tokens_in += reply["usage"].get("input", 0)
        c.tokens_out += reply["usage"].get("output", 0)
        calls = reply["tool_calls"]
        wire = [
            {"id": k["id"], "type": "function", "function": {"name": k["name"], "arguments": k["raw_arguments"]}}
            for k in calls
        ]
        c.messages.append({"role": "assistant", "content": reply["content"], **({"tool_calls": wire} if wire else {})})
        if reply["content"]:
            rt.say(hunt, "model", trim(reply["content"], 500))
        valid, last = False, "a reply with no tool call"
        for k in calls:
            if c.concluded:
                content = "ignored: the investigation is concluded"
            else:
                outcome = surface.run(k["name"], k["arguments"], k["parse_error"])
                content, valid = outcome.content, valid or outcome.valid
                last = content
            c.messages.append({"role": "tool", "tool_call_id": k["id"], "content": content})
        if not calls:
            c.messages.append(
                {"role": "user", "content": "Continue with tool calls; call conclude when the numbers name the cause."}
            )
        c.invalid_streak = 0 if valid else c.invalid_streak + 1
        if c.invalid_streak >= s.max_invalid and not c.concluded:
            hunt.status = "inconclusive"
            hunt.error = (
                f"the model made no valid tool call in {c.invalid_streak} replies in a row "
                f"(the last: {first_line(last, 200)})"
            )
            rt.say(hunt, "error", hunt.error)

    def localize(self, hunt: Hunt, rt: Runtime) -> None:
        """The model named the cause in ``conclude``; 'none' ends the hunt here."""
        if hunt.root_kind == "none":
            hunt.status = "concluded"

    def confirm(self, hunt: Hunt, rt: Runtime) -> bool:
        """The graph's own A/B of the model's conclusion, whatever its kind."""
        k = hunt.root_kind
        if k == "commit":
            return confirm(hunt, rt)
        now = hunt.get(hunt.reproduced) if hunt.reproduced else rt.planned(hunt, "now", "WORKTREE")
        if k == "env":
            var = hunt.root_ref or ""
            fixed = rt.planned(hunt, f"now-without-{var}", "WORKTREE", env={var: ""})
        elif k == "uncommitted":
            culprits = {p.strip() for p in (hunt.root_ref or "").split(",")}
            rest = sorted(set(changed_files(hunt, rt)) - culprits)
            fixed = (
                rt.planned(hunt, "now-without-patch", "WORKTREE", paths=rest)
                if rest
                else rt.planned(hunt, "HEAD", "HEAD")
            )
        elif k == "config" and hunt.target.good_launch:
            fixed = rt.planned(hunt, "launch-good", "WORKTREE", launch=hunt.target.good_launch)
        else:  # hardware (its reading is the evidence), dependency (no A/B here)
            hunt.confirmation = {"ok": True, "text": f"no A/B for a {k} cause: the model's evidence stands"}
            return True
        try:
            cmp, now, fixed = ab(hunt, rt, now, fixed, "now", fixed.label, better="b")
        except ProbeError as exc:  # a side does not build, serve or run: the model hears why
            why = f"the A/B of {fixed.label} could not be measured: {first_line(exc)}"
            return record_outcome(hunt, rt, False, why, [])
        ok = explains(hunt, cmp, fixed, now)
        return record_confirmation(hunt, rt, ok, cmp, fmt(cmp, now, fixed, hunt.target.metric), [now.id, fixed.id])

    def confirm_failed(self, hunt: Hunt, rt: Runtime) -> None:
        """Back to the model with the numbers; after two failed conclusions, inconclusive."""
        c = hunt.conversation
        c.failed_confirmations += 1
        why = hunt.confirmation.get("text", "")
        named = f"{hunt.root_kind} {hunt.root_ref or ''}".strip()
        rt.say(hunt, "self-correction", f"{named} not confirmed ({why})")
        hunt.root_kind, hunt.root_ref, hunt.culprits = None, None, []
        if c.failed_confirmations >= MAX_FAILED_CONFIRMATIONS:
            hunt.status = "inconclusive"
            hunt.root_summary = f"the model's conclusions did not survive their confirmation A/B ({why})"
            return
        c.concluded = False
        c.messages.append(
            {
                "role": "user",
                "content": f"Your conclusion ({named}) did not survive the confirmation A/B: {why}. "
                "Record what that means in the ledger and continue.",
            }
        )

    def propose(self, hunt: Hunt) -> None:
        propose(hunt)


def settings_for(
    policy: str,
    model: str | None,
    base_url: str | None = None,
    allow_shell: list[str] | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
) -> LLMSettings | None:
    """The LLM settings of a command line (None for a policy without a model); a ``ValueError``
    names the option that is wrong."""
    if policy != "llm":
        if base_url or allow_shell:
            raise ValueError(f"--base-url/--allow-shell: only with --policy llm (not {policy})")
        return None
    if not model:
        raise ValueError("--model: required with --policy llm (e.g. gpt-4.1, or the name a vLLM server serves)")
    extra = {k: v for k, v in (("max_turns", max_turns), ("max_tokens", max_tokens)) if v is not None}
    return LLMSettings(base_url=base_url, allow_shell=[a for a in allow_shell or [] if a.strip()], **extra)
