"""Localizing a change by halving (uncommitted files, changed packages) where each state is a
dear server launch: a step is one launch of the half, placed between the two ends the group's
own A/B has just measured; only a launch that leaves it undecided costs the step a fresh A/B.
The working tree's variables and files are bisected together as prefixes of one list (``agent.joint``)."""

from __future__ import annotations

import random

from agent.experiments import halve
from agent.state import Budget, Hunt, Hypothesis, Measured, Target
from tests.test_multiple import _measured


def _launches(rng: random.Random, mean: float, launches: int, per_launch: int = 8, cv: float = 0.01) -> list[float]:
    """Samples of ``launches`` launches: each its own small offset, ``cv`` sample noise."""
    out = []
    for _ in range(launches):
        offset = rng.gauss(0, 0.004 * mean)
        out += [rng.gauss(mean + offset, cv * mean) for _ in range(per_launch)]
    return out


class DearHost:
    """A one-slot node where a launch is dear: ``measure_planned`` is one launch of a half (its
    mean from ``means``, by the files it holds); ``measure_pair`` is a fresh A/B (recorded)."""

    def __init__(self, hunt: Hunt, means: dict[str, float], noisy: set[str]) -> None:
        self.hunt, self.means, self.noisy, self.rng = hunt, means, noisy, random.Random(7)
        self.launched: list[str] = []
        self.pairs: list[tuple[str, str]] = []

    def dear_launches(self, hunt) -> bool:
        return True

    def ab_samples(self, hunt, alpha: float = 0.01) -> int:
        return 8

    def measure_planned(self, hunt, planned, samples=None):
        self.launched.append(planned.label)
        cv = 0.12 if planned.label in self.noisy else 0.01  # a launch beside a neighbour's burst
        return _measured(hunt, planned.label, _launches(self.rng, self.means[planned.label], 1, cv=cv), [8])

    def measure_pair(self, hunt, a, b, samples, fresh=False, relaunch=False, single=False):
        self.pairs.append((a.label, b.label))
        ma = _measured(hunt, a.label, _launches(self.rng, self.means.get(a.label, 80.0), 2, 4), [4, 4])
        mb = _measured(hunt, b.label, _launches(self.rng, self.means[b.label], 2, 4), [4, 4])
        return ma, mb

    def joined(self, hunt, first, more):
        return _measured(hunt, first.label, first.samples + more.samples, first.groups + more.groups)


def _localize(means: dict[str, float], noisy: set[str] = frozenset()):
    """Four changed files, ``c.py`` the slow one: HEAD 80 tok/s, all four applied 64 tok/s."""
    hunt = Hunt(run_id="r", policy="methodical", target=Target(repo="/r", good_value=80, bad_value=64, slots=1),
                budget=Budget())  # fmt: skip
    host = DearHost(hunt, {"HEAD": 80.0, **means}, set(noisy))
    rng = random.Random(1)
    head = _measured(hunt, "HEAD", _launches(rng, 80.0, 2, 4), [4, 4])
    now = _measured(hunt, "now", _launches(rng, 64.0, 2, 4), [4, 4])
    suspects = [
        Hypothesis(id=f"h{i}", category="uncommitted", statement=f"{p} slows it", test="A/B", status="supported",
                   subject=p)
        for i, p in enumerate(["a.py", "b.py", "c.py", "d.py"])
    ]  # fmt: skip

    def state_for(half):  # as ``Runtime.planned``: counted, not measured
        label = "HEAD+" + ",".join(x.subject for x in half)
        return Measured(id="", label=label, ref="r", launch="L", samples=[], median=0, ci_low=0, ci_high=0, cv=0)

    def words(half, moved, numbers):
        return f"{'holds it' if moved else 'clear'}: {numbers}"

    left, _base, _alone = halve(hunt, host, suspects, head, "HEAD", now.median - head.median, state_for, words,
                                top=now)  # type: ignore[arg-type]  # fmt: skip
    return left, suspects, host


def test_each_step_is_one_launch_of_the_half_when_it_lands_clearly_at_one_end():
    left, suspects, host = _localize({"HEAD+a.py,b.py": 80.0, "HEAD+c.py": 64.0})
    assert [x.subject for x in left] == ["c.py"]
    assert host.launched == ["HEAD+a.py,b.py", "HEAD+c.py"] and host.pairs == []  # two launches, no A/B
    a, _b, _c, d = suspects
    assert a.status == "refuted" and a.reason.startswith("clear: now ") and "0% of the way from HEAD to now" in a.reason
    assert d.status == "refuted" and d.reason.startswith("holds it: HEAD ")  # HEAD+c differs from HEAD


def test_a_launch_too_noisy_to_place_at_either_end_is_followed_by_the_fresh_ab_of_before():
    """The half's one launch ran beside a neighbour's burst: 12 % noise around a value halfway
    between the ends. It cannot be told apart from the end it is far from, so the step takes the
    A/B it always took (fresh launches of both sides), which decides it."""
    host_means = {"HEAD+a.py,b.py": 72.0, "HEAD+c.py": 64.0}
    left, _suspects, host = _localize(host_means, noisy={"HEAD+a.py,b.py"})
    assert host.launched == ["HEAD+a.py,b.py", "HEAD+c.py"]
    assert host.pairs == [("HEAD", "HEAD+a.py,b.py")]  # only the noisy step took an A/B
    assert [x.subject for x in left] == ["c.py"]


class DearNode(DearHost):
    """``DearHost`` that also plans states (``Runtime.planned``: what each is, nothing measured)."""

    def __init__(self, hunt: Hunt, means: dict[str, float]) -> None:
        super().__init__(hunt, means, set())
        self.planned_states: list[tuple[str, str, dict, list | None]] = []
        self.said: list[str] = []

    def planned(self, hunt, label, ref, env=None, launch=None, paths=None):
        self.planned_states.append((label, ref, dict(env or {}), paths))
        return Measured(id="", label=label, ref=ref, launch="L", env=env or {}, samples=[], median=0, ci_low=0,
                        ci_high=0, cv=0)  # fmt: skip

    def say(self, hunt, kind, text):
        self.said.append(text)


def _joint(means: dict[str, float], variables: list[str], files: list[str]):
    """``joint.localize`` on a dear node: clean HEAD (every variable blanked, no patch) 80 tok/s,
    now (all of them) 64; each prefix's mean from ``means``."""
    from agent import joint

    hunt = Hunt(run_id="r", policy="methodical", target=Target(repo="/r", good_value=80, bad_value=64, slots=1),
                budget=Budget())  # fmt: skip
    node = DearNode(hunt, means)
    rng = random.Random(3)
    clean = _measured(hunt, "clean", _launches(rng, 80.0, 2, 4), [4, 4])
    now = _measured(hunt, "now", _launches(rng, 64.0, 2, 4), [4, 4])
    env = [Hypothesis(id=f"e{i}", category="environment", statement=f"{v}=1 slows it", test="A/B", status="open",
                      subject=v) for i, v in enumerate(variables)]  # fmt: skip
    patches = [Hypothesis(id=f"p{i}", category="uncommitted", statement=f"{p} slows it", test="A/B", status="open",
                          subject=p) for i, p in enumerate(files)]  # fmt: skip
    joint.localize(hunt, node, env, patches, now, clean)  # type: ignore[arg-type]
    return node, env, patches, hunt, clean, now


def test_variables_and_files_are_bisected_together_as_prefixes_between_the_clean_ab_s_ends():
    """Two tuning variables and two changed files, of which ``b.py`` (the last) is slow. Each step
    is one launch of clean HEAD with the first k suspects: the variables alone run like clean, so
    does the variables plus ``a.py``; ``b.py`` is the one suspect between that state and now,
    which the clean A/B measured already: two launches, no A/B, no launch of ``b.py`` alone. Each
    prefix keeps its own variables and blanks the others."""
    node, env, patches, _hunt, _clean, now = _joint(
        {"clean+NCCL_A+NCCL_B": 80.0, "clean+NCCL_A+NCCL_B+a.py": 80.0}, ["NCCL_A", "NCCL_B"], ["a.py", "b.py"]
    )
    assert node.launched == ["clean+NCCL_A+NCCL_B", "clean+NCCL_A+NCCL_B+a.py"] and node.pairs == []
    assert node.planned_states[0] == ("clean+NCCL_A+NCCL_B", "HEAD", {}, None)  # both variables as they are
    assert node.planned_states[1] == ("clean+NCCL_A+NCCL_B+a.py", "WORKTREE", {}, ["a.py"])
    assert [x.status for x in env + patches] == ["refuted", "refuted", "refuted", "supported"]
    b = patches[1]
    assert b.reason.startswith(
        "localization: clean HEAD with [NCCL_A, NCCL_B, a.py] runs like clean HEAD, with b.py added it reproduces"
    )
    assert b.evidence[1] == now.id  # the two states that differ in b.py alone: the last prefix and now
    assert "the change that matters: b.py (uncommitted)" in node.said


def test_a_cause_in_the_middle_is_named_by_the_two_prefixes_either_side_of_it():
    """Eleven suspects (three variables, eight files), the fifth slow, as in the seed's
    ``eagle3_topk_patch``: four launches (the halving of arbitrary halves took five: four steps
    and the survivor alone). The first five are slow, the first two fast, the first three and
    four fast: the fifth is the one the first four lack. Each variable not yet added is blanked."""
    variables = ["NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_PROTO"]
    files = ["engine.py", "topk.py", "c.py", "d.py", "e.py", "f.py", "g.py", "h.py"]
    suspects = variables + files
    means = {"clean+" + "+".join(suspects[:k]): 80.0 if k < 5 else 64.0 for k in range(1, 11)}
    node, env, patches, hunt, _clean, _now = _joint(means, variables, files)
    assert node.launched == ["clean+" + "+".join(suspects[:k]) for k in (5, 2, 3, 4)] and node.pairs == []
    assert node.planned_states[1][2] == {"NCCL_PROTO": ""}  # the first two kept, the third blanked
    assert [x.subject for x in env + patches if x.status == "supported"] == ["topk.py"]
    topk = patches[1]
    fast, slow = (hunt.get(i) for i in topk.evidence)
    assert (fast.label, slow.label) == ("clean+" + "+".join(suspects[:4]), "clean+" + "+".join(suspects[:5]))
    assert all(x.status == "refuted" for x in env + patches if x is not topk)
    assert patches[2].reason.startswith("localization: clean HEAD with only [NCCL_ALGO, NCCL_P2P_LEVEL, NCCL_PROTO, ")
