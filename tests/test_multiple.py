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
