"""The working tree's changes localized together: tuning variables and uncommitted files as one
list of suspects, halved between the clean A/B's two ends.

When HEAD with the variables blanked and no patch ("clean") is faster than what was reproduced
("now"), every bit of that difference is a variable or a file: the two states run the same commit.
Before this each group then took its own A/B (now vs now with the variables blanked, HEAD vs the
working tree) and the winning group was halved with an A/B per step: on a one-slot node, where a
launch is minutes, a patch of five files behind three variables took 18 launches to name one
file. Here, where launches are dear, the clean A/B's ends are the references and each step is one
launch of a half (the half's files applied, the half's variables as they are, every other one
blanked), placed between them (``experiments.one_launch_step``; the fresh A/B of before only when
a launch decides nothing): three launches for eight suspects, none for the groups' own A/Bs.
"""

from __future__ import annotations

from agent.experiments import ab, explains, fmt, halve, launch_aware, one_launch_step
from agent.runtime import Runtime
from agent.state import Hunt, Hypothesis, Measured


def localize(hunt: Hunt, rt: Runtime, env: list[Hypothesis], patches: list[Hypothesis], now, clean) -> None:
    """Halve ``env`` + ``patches`` between ``clean`` (none of them) and ``now`` (all of them); the one
    left is supported (its evidence: its own state against clean), the others refuted with the step
    that cleared them. Files off the executed path go last, so they are tested last."""
    suspects = env + sorted(patches, key=lambda x: "not on the executed path" in x.reason)
    variables = [x.subject for x in env if x.subject]

    def state_for(half: list[Hypothesis]) -> Measured:
        kept = {x.subject for x in half if x.category == "environment"}
        paths = [x.subject for x in half if x.category == "uncommitted" and x.subject]
        blank = {v: "" for v in variables if v not in kept}
        label = "clean+" + "+".join(x.subject or "" for x in half)
        return rt.planned(hunt, label, "WORKTREE" if paths else "HEAD", env=blank, paths=paths or None)

    def words(half: list[Hypothesis], moved: bool, numbers: str) -> str:
        names = ", ".join(x.subject or "" for x in half)
        if moved:
            return f"localization: clean HEAD with only [{names}] already reproduces the slowdown ({numbers})"
        return f"localization: clean HEAD with [{names}] is as fast as clean HEAD ({numbers})"

    full = now.median - clean.median
    left, clean, alone = halve(hunt, rt, suspects, clean, "clean", full, state_for, words, top=now)
    last = left[0]
    if alone is not None:  # the last step measured it alone, and it moved
        m, moved = alone, True
        numbers = fmt(launch_aware(hunt, clean, m, context=True), clean, m, hunt.target.metric)
    else:  # named by elimination: its own state must show it too
        m, step = one_launch_step(hunt, rt, clean, now, state_for([last]), full)
        if step is None:
            cmp, clean, m = ab(hunt, rt, clean, m, "clean", m.label)
            moved, numbers = explains(hunt, cmp, clean, m), fmt(cmp, clean, m, hunt.target.metric)
        else:
            moved, _clean, m, numbers = step
    if not moved:
        for x in left:
            x.status, x.reason = (
                "inconclusive",
                f"halving inconclusive: {last.subject} alone does not reproduce it ({numbers})",
            )
        rt.say(hunt, "localize", f"the changes localized to nothing alone: {numbers}")
        return
    last.status, last.evidence = "supported", [clean.id, m.id]
    last.reason = f"localization: clean HEAD with only {last.subject} reproduces the slowdown ({numbers})"
    rt.say(hunt, "localize", f"the change that matters: {last.subject} ({last.category})")
