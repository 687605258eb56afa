"""Several causes of different kinds: a commit and an uncommitted patch each cost part of the drop.
Both are named (``root_cause.kind: multiple``), each with its share of the drop measured, and
the proposal fixes both; the eval scores such a verdict like ``two_culprits``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from evals.scorer import named_refs, score
from tests.conftest import sleuth_in_process

SPEC = Path(__file__).resolve().parents[1] / "evals" / "suites" / "core" / "commit_and_patch.toml"


@pytest.fixture
def two_kinds(tmp_path: Path, write_spec):
    # A quieter host than the suite's (its A/Bs decide in one round): the behaviour, not the noise.
    text = SPEC.read_text().replace("[launch]", "[system]\nnoise_cv = 0.01\nlaunch_cv = 0.01\n\n[launch]")
    return build(load_spec(write_spec(text)), tmp_path / "lab")


def test_a_commit_and_a_patch_are_both_named_with_their_shares_and_both_fixed(two_kinds, tmp_path):
    truth = json.loads((two_kinds.root / "truth.json").read_text())
    proc = sleuth_in_process("hunt", "--alert", two_kinds.root / "alert.json", "--db", tmp_path / "r.db", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "multiple"
    causes = {c["kind"]: c for c in v["root_causes"]}
    commit = next(c["ref"] for c in truth["root_causes"] if c["kind"] == "commit")
    assert set(causes) == {"commit", "uncommitted"}
    assert causes["commit"]["ref"] == commit and causes["uncommitted"]["ref"].endswith("layers/moe/topk.py")
    # Each one's own A/B recovers a part of the drop. (The drop is the alert's good value against
    # the reproduction: a loaded machine moves that denominator, so the shares, about half each on
    # a quiet one, are only held to "some, and not both all of it"; under CI's load the commit's
    # came out at or above 100 % once, the patch's at 21 %.)
    shares = sorted(c["share_pct"] for c in causes.values())
    assert shares[0] > 0 and shares[0] < 100, causes
    action = v["proposed_action"]
    assert action["kind"] == "revert" and action["ref"] == commit  # the step perf-sleuth can land, first
    assert "then discard the uncommitted change to python/minisglang/layers/moe/topk.py" in action["detail"]
    s = score(v, truth, [], candidates=6, samples=0, wall_s=1.0, repo_intact=True)
    assert s.exact and s.kind_right


def test_the_scorer_reads_every_cause_of_a_multiple_verdict():
    verdict = {
        "root_cause": {"kind": "multiple", "ref": "abc1234567, a.py"},
        "root_causes": [{"kind": "commit", "ref": "abc1234567"}, {"kind": "uncommitted", "ref": "a.py"}],
        "culprits": ["abc1234567"],
        "proposed_action": {"kind": "revert", "ref": "abc1234567"},
    }
    truth = {
        "kind": "multiple",
        "root_causes": [{"kind": "commit", "ref": "abc1234567ffff"}, {"kind": "uncommitted", "ref": "a.py"}],
    }
    assert named_refs(verdict) == ["abc1234567", "a.py"]
    assert score(verdict, truth, [], 4, 0, 1.0, True).exact
    one_only = {
        **verdict,
        "root_causes": verdict["root_causes"][:1],
        "root_cause": {"kind": "commit", "ref": "abc1234567"},
    }
    assert not score(one_only, truth, [], 4, 0, 1.0, True).exact  # half of the answer is not exact


class ScriptedWorld:
    """The runtime's measuring side, answering each fresh A/B with the next scripted pair of
    sample lists (one launch a side); what was asked is kept."""

    def __init__(self, hunt, pairs: list[tuple[list[float], list[float]]]) -> None:
        self.hunt, self.pairs, self.asked, self.said = hunt, pairs, [], []

    def ab_samples(self, hunt, alpha: float = 0.01) -> int:
        return 6

    def dear_launches(self, hunt) -> bool:
        return False

    def measure_pair(self, hunt, a, b, samples, fresh=False, relaunch=False, single=False):
        self.asked.append((a.label, b.label, samples, fresh, relaunch))
        got_a, got_b = self.pairs.pop(0)
        return _measured(hunt, a.label, got_a), _measured(hunt, b.label, got_b)

    def fresh_pair(self, hunt, a, b, samples, single=False):  # as Runtime's: measured sides, fresh, relaunched
        return self.measure_pair(hunt, a, b, samples, fresh=True, relaunch=True, single=single)

    def joined(self, hunt, first, more):
        return _measured(hunt, first.label, first.samples + more.samples, first.groups + more.groups)

    def say(self, hunt, kind: str, text: str) -> None:
        self.said.append(text)


def _measured(hunt, label: str, samples: list[float], groups: list[int] | None = None):
    import statistics

    from agent.state import Measured

    med = statistics.median(samples)
    m = Measured(
        id=f"m{len(hunt.measurements) + 1}", label=label, ref="HEAD", launch="L", samples=samples,
        groups=groups or [len(samples)], median=med, ci_low=min(samples), ci_high=max(samples),
        cv=statistics.pstdev(samples) / med,
    )  # fmt: skip
    hunt.measurements.append(m)
    return m


def _hunt_with_a_supported_patch():
    """A 20 % drop (90 -> 72); the uncommitted patch's own A/B said HEAD 80 vs now 72."""
    from agent.state import Budget, Hunt, Hypothesis, Target

    hunt = Hunt(run_id="r", policy="methodical", target=Target(repo="/r", good_value=90, bad_value=72), budget=Budget())
    now = _measured(hunt, "now", [72.0, 71.5, 72.4, 71.8, 72.1, 72.3])
    head = _measured(hunt, "HEAD", [80.0, 79.6, 80.3, 80.1, 79.8, 80.2])
    hunt.reproduced = now.id
    hunt.hypotheses = [
        Hypothesis(id="h2", category="uncommitted", statement="the patch slows it", test="A/B", status="supported",
                   reason="HEAD 80 vs now 72", evidence=[head.id, now.id], subject="scheduler.py"),
    ]  # fmt: skip
    cause = {"category": "uncommitted", "kind": "uncommitted", "ref": "scheduler.py", "summary": "the patch"}
    return hunt, cause


def test_a_second_cause_is_taken_again_on_fresh_launches_and_dropped_when_it_does_not_reproduce():
    """One A/B passed by chance beside a real cause is not a cause: the same two states measured
    again, on servers launched for it, show nothing, so it is dropped (and said to be)."""
    from agent.multiple import _confirm_again

    hunt, cause = _hunt_with_a_supported_patch()
    same = [76.0, 75.6, 76.3, 75.9, 76.1, 75.8]
    world = ScriptedWorld(hunt, [(same, list(reversed(same)))] * 3)  # every round: no difference
    assert _confirm_again(hunt, world, cause) is False  # type: ignore[arg-type]
    assert world.asked[0] == ("HEAD", "now", 6, True, True)  # fresh samples, relaunched servers
    h = hunt.hypotheses[0]
    assert h.status == "inconclusive" and "not confirmed, taken again on fresh launches" in h.reason
    assert any("cause dropped, a fresh A/B does not reproduce it" in s for s in world.said)


def test_a_second_cause_that_reproduces_on_fresh_launches_stands_with_those_numbers():
    from agent.multiple import _confirm_again, share

    hunt, cause = _hunt_with_a_supported_patch()
    world = ScriptedWorld(hunt, [([81.0, 80.6, 81.2, 80.9, 81.1, 80.8], [72.0, 71.7, 72.2, 71.9, 72.3, 71.8])])
    assert _confirm_again(hunt, world, cause) is True  # type: ignore[arg-type]
    fresh = cause["confirmation"]["evidence"]
    assert fresh and fresh != hunt.hypotheses[0].evidence  # the share comes from the fresh A/B
    drop = 90 - hunt.get(hunt.reproduced).median  # 17.95
    assert share(hunt, cause) == round((80.95 - 71.95) / drop * 100, 1)  # 50.1 %, not the first A/B's 44.6 %
