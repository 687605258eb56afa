"""Hypotheses decided by one shared experiment, shown as one row.

On the seed one clean A/B refutes three variables and eight patches at once; listed one per row
the same "HEAD 58.38 vs now 57.21 tok_per_s (-2.0%, p=0.15, same)" repeats eleven times and hides
the rows that differ. Rows group when they share the verdict, the reason and the evidence (the
same measurements): the group names how many of each category it covers and lists them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel

CATEGORY_NAMES = {
    "uncommitted": "uncommitted changes",
    "history": "history",
    "config": "config",
    "environment": "environment",
    "hardware": "hardware",
    "dependencies": "dependencies",
    "code_path": "code path",
}
# How a member is named in a group's list (its subject, else its statement).
_NOUN = {
    "environment": ("variable", "variables"),
    "uncommitted": ("changed file", "changed files"),
    "dependencies": ("package", "packages"),
}


class HypothesisGroup(BaseModel):
    ids: list[str]
    categories: list[str]  # in order of first appearance
    statement: str  # the one statement, or what the group covers ("3 variables and 8 changed files")
    covers: list[str]  # each member's subject (or statement), for the list under a grouped row
    status: str
    reason: str
    evidence: list[str]

    @property
    def id(self) -> str:
        """Its members' ids as runs ("h2-h5, h7-h12"): the seed's "h2-h12" spanned h6, a row of
        its own below (demoted), and read as if h6 were among the eleven."""
        return id_runs(self.ids)

    def covers_text(self, limit: int = 12) -> str:
        """The members a grouped row lists, the first ``limit`` by name and the rest counted: a host
        with 103 packages newer than the known-good commit is one line, not a page."""
        if len(self.ids) < 2:
            return ""
        shown = ", ".join(self.covers[:limit])
        rest = len(self.covers) - limit
        return shown + (f" and {rest} more" if rest > 0 else "")

    @property
    def category(self) -> str:
        return ", ".join(CATEGORY_NAMES.get(c, c) for c in self.categories)


def id_runs(ids: list[str]) -> str:
    """Ids numbered alike ("h2", "h3", ...) as runs of consecutive numbers, "h2-h5, h7-h12"; others
    as the first and the last."""
    nums = [int(i[1:]) if i[:1] == "h" and i[1:].isdigit() else None for i in ids]
    if len(ids) == 1 or None in nums:
        return ids[0] if len(ids) == 1 else f"{ids[0]}-{ids[-1]}"
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)  # type: ignore[arg-type]
        else:
            runs.append([n])  # type: ignore[list-item]
    return ", ".join(f"h{r[0]}" if len(r) == 1 else f"h{r[0]}-h{r[-1]}" for r in runs)


def _get(h: Any, *names: str) -> Any:
    for name in names:
        value = h.get(name) if isinstance(h, dict) else getattr(h, name, None)
        if value is not None:
            return value
    return None


def group_hypotheses(hypotheses: list[Any]) -> list[HypothesisGroup]:
    """Group consecutive-or-not hypotheses (models or store rows) that share status, reason and
    evidence; a hypothesis with no evidence (a reading) stays on its own row, except untested ones
    (inconclusive, no evidence) of one category and one reason, which share a row."""
    groups: list[HypothesisGroup] = []
    index: dict[tuple, HypothesisGroup] = {}
    for h in hypotheses:
        evidence = _get(h, "evidence") or []
        if isinstance(evidence, str):
            evidence = [e for e in evidence.strip("[]").replace('"', "").split(",") if e.strip()]
        status, reason = _get(h, "status") or "", _get(h, "reason") or ""
        hid, category, statement = _get(h, "id", "hid") or "", _get(h, "category") or "", _get(h, "statement") or ""
        member = _get(h, "subject") or statement
        key = (status, reason, tuple(sorted(str(e).strip() for e in evidence)))
        # Untested members of one category for one reason ("97 packages: a benchmark command has no
        # launch to put old versions in") are one row, not a page of identical verdicts.
        untested = not evidence and status == "inconclusive" and bool(reason)
        if untested:
            key = (status, reason, ("untested", category))
        if (evidence or untested) and key in index:
            g = index[key]
            g.ids.append(hid)
            g.covers.append(member)
            if category not in g.categories:
                g.categories.append(category)
            continue
        g = HypothesisGroup(
            ids=[hid],
            categories=[category],
            statement=statement,
            covers=[member],
            status=status,
            reason=reason,
            evidence=[str(e) for e in evidence],
        )
        groups.append(g)
        if evidence or untested:
            index[key] = g
    for g in groups:
        if len(g.ids) > 1:
            g.statement = _what_it_covers(g, hypotheses)
    return groups


def _what_it_covers(g: HypothesisGroup, hypotheses: list[Any]) -> str:
    counts = Counter(_get(h, "category") for h in hypotheses if (_get(h, "id", "hid") or "") in g.ids)
    parts = []
    for category in g.categories:
        n = counts[category]
        one, many = _NOUN.get(category, (f"{category} hypothesis", f"{category} hypotheses"))
        parts.append(f"{n} {one if n == 1 else many}")
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


SCREEN_ROWS = 12  # a report a person reads fits one screen
# A row's evidence, at most (its reason grows with each step: "not confirmed ...", "undone by ...";
# a toolz trial's history row wrapped to 40 lines of a 100-column terminal, 85 in all).
SCREEN_REASON = 360


def short_reason(text: str, limit: int = SCREEN_REASON) -> str:
    """``text`` within ``limit`` characters: its start (the A/B that decided) and its end (the
    latest step), the middle said to be in ``sleuth show RUN --json``."""
    if len(text) <= limit:
        return text
    gap = " [...; `sleuth show RUN --json` has it whole] "
    head = (limit - len(gap)) * 2 // 3
    start, end = text[:head], text[-(limit - len(gap) - head) :]
    # Cut at words, never inside one ("conflicts i [...] mmits", trial 19): the start ends at its
    # last space, the end begins after its first.
    if " " in start and not text[head].isspace():
        start = start[: start.rindex(" ")]
    if " " in end and not text[-len(end) - 1].isspace():
        end = end[end.index(" ") + 1 :]
    return start.rstrip() + gap + end.lstrip()


def for_screen(groups: list[HypothesisGroup], limit: int = SCREEN_ROWS) -> list[HypothesisGroup]:
    """At most ``limit`` rows: the groups that decided something first (supported, then
    inconclusive, then the rest, each in ledger order), and every group past ``limit - 1`` folded
    into one last row that counts them by verdict and category; each row's evidence cut to
    ``SCREEN_REASON`` characters. ``sleuth show RUN --json`` and the verdict JSON keep every
    hypothesis, whole."""
    groups = [g.model_copy(update={"reason": short_reason(g.reason)}) for g in groups]
    if len(groups) <= limit:
        return groups
    rank = {"supported": 0, "inconclusive": 1, "open": 2}
    keep = set(sorted(range(len(groups)), key=lambda i: (rank.get(groups[i].status, 3), i))[: limit - 1])
    rest = [g for i, g in enumerate(groups) if i not in keep]
    ids = [hid for g in rest for hid in g.ids]
    by_status = Counter(g.status for g in rest for _ in g.ids)
    categories = list(dict.fromkeys(c for g in rest for c in g.categories))
    folded = HypothesisGroup(
        ids=ids,
        categories=categories,
        statement=f"{len(ids)} more hypotheses in {len(rest)} rows",
        covers=[c for g in rest for c in g.covers],
        status=", ".join(f"{n} {s}" for s, n in by_status.most_common()),
        reason="folded to keep the report to one screen; `sleuth show RUN --json` lists each",
        evidence=[],
    )
    return [g for i, g in enumerate(groups) if i in keep] + [folded]
