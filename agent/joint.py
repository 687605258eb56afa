"""The working tree's changes localized together: tuning variables and uncommitted files as one
ordered list of suspects, bisected between the clean A/B's two ends.

When HEAD with the variables blanked and no patch ("clean") is faster than what was reproduced
("now"), every bit of that difference is a variable or a file: the two states run the same commit.
Before this each group then took its own A/B (now vs now with the variables blanked, HEAD vs the
working tree) and the winning group was halved with an A/B per step: on a one-slot node, where a
launch is minutes, a patch of five files behind three variables took 18 launches to name one
file. Here, where launches are dear, the clean A/B's ends are the references and each step is one
launch of clean HEAD with the first k suspects (their files applied, their variables as they are,
every other one blanked), placed between them (``experiments.one_launch_step``; the fresh A/B of
before only when a launch decides nothing): four launches for eleven suspects, none for the
groups' own A/Bs, and the cause's evidence two measured states that differ in it alone.
"""

from __future__ import annotations

from agent.experiments import fmt, halving_step, launch_aware, one_launch_step
from agent.runtime import Runtime
from agent.state import Hunt, Hypothesis, Measured


def localize(hunt: Hunt, rt: Runtime, env: list[Hypothesis], patches: list[Hypothesis], now, clean) -> None:
    """Bisect ``env`` + ``patches`` as an ordered list between ``clean`` (none of them) and ``now``
    (all of them), as ``git bisect`` does commits: each step is one launch of clean HEAD with the
    first k suspects (``prefix``), which either still runs like clean (the cause is later) or
    already reproduces the slowdown (it is among the first k). It ends at two neighbouring
    prefixes, the shorter like clean and the longer slow, which differ in exactly one suspect: that
    one is supported, its evidence the two prefixes' own measurements, each refuted suspect the
    step that cleared it. Files off the executed path go last, so they are tested last.

    Before this the halves were arbitrary subsets, and the suspect left by elimination took one
    launch more to be measured alone (two states that differ only in it were never measured):
    ``eagle3_topk_patch`` took five launches for eleven suspects where four do. A bisection of
    prefixes always ends at such a pair, and needs no launch beyond its steps (the ends are
    ``clean`` and ``now``, both measured)."""
    suspects = env + sorted(patches, key=lambda x: "not on the executed path" in x.reason)
    variables = [x.subject for x in env if x.subject]

    def prefix(k: int) -> Measured:
        """Clean HEAD with the first ``k`` suspects: their files applied, their variables as they
        are, every other variable blanked."""
        first = suspects[:k]
        kept = {x.subject for x in first if x.category == "environment"}
        paths = [x.subject for x in first if x.category == "uncommitted" and x.subject]
        blank = {v: "" for v in variables if v not in kept}
        label = "clean+" + "+".join(x.subject or "" for x in first)
        return rt.planned(hunt, label, "WORKTREE" if paths else "HEAD", env=blank, paths=paths or None)

    full = now.median - clean.median
    lo, hi = 0, len(suspects)  # prefix(lo) runs like clean, prefix(hi) is slow
    fast, slow = None, now  # their measurements (None: prefix(0), clean itself)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        m, step = one_launch_step(hunt, rt, clean, now, prefix(mid), full)
        moved, clean, m, numbers = step or halving_step(hunt, rt, clean, m, "clean", full)
        names = ", ".join(x.subject or "" for x in suspects[:mid])
        if moved:
            why = f"localization: clean HEAD with only [{names}] already reproduces the slowdown ({numbers})"
            cleared, hi, slow = suspects[mid:hi], mid, m
        else:
            why = f"localization: clean HEAD with [{names}] is as fast as clean HEAD ({numbers})"
            cleared, lo, fast = suspects[lo:mid], mid, m
        for x in cleared:
            x.status, x.reason, x.evidence = "refuted", why, [clean.id, m.id]
    last, fast = suspects[hi - 1], fast or clean  # clean as last measured (a step's A/B may add to it)
    numbers = fmt(launch_aware(hunt, fast, slow, context=True), fast, slow, hunt.target.metric)
    before = ", ".join(x.subject or "" for x in suspects[:lo])
    with_it = (
        f"clean HEAD with [{before}] runs like clean HEAD, with {last.subject} added it"
        if lo
        else f"clean HEAD with only {last.subject}"
    )
    last.status, last.evidence = "supported", [fast.id, slow.id]
    last.reason = f"localization: {with_it} reproduces the slowdown ({numbers})"
    rt.say(hunt, "localize", f"the change that matters: {last.subject} ({last.category})")
