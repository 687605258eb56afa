"""The scorer: a run's verdict against its scenario's truth."""

from __future__ import annotations

import json

from evals.scorer import score

A, B, C = "a" * 40, "b" * 40, "c" * 40
TWO = {
    "scenario": "two",
    "kind": "commit",
    "root_causes": [{"kind": "commit", "ref": A}, {"kind": "commit", "ref": B}],
    "red_herrings": [{"kind": "uncommitted", "ref": "python/x/topk.py"}, {"kind": "commit", "ref": C}],
}


def verdict(kind="commit", ref=A, culprits=(A,), probes=6, action=None, hyps=()):
    return {
        "status": "awaiting_approval",
        "root_cause": {"kind": kind, "ref": ref, "summary": ""} if kind else None,
        "culprits": list(culprits),
        "probes": probes,
        "proposed_action": action,
        "hypotheses": list(hyps),
    }


def run(v, truth=TWO, events=(), candidates=20, intact=True):
    return score(v, truth, list(events), candidates, samples=50, wall_s=12.0, repo_intact=intact)


def test_both_culprits_named_is_exact_and_one_of_two_is_half():
    assert run(verdict(culprits=(A, B))).exact
    half = run(verdict(culprits=(A,)))
    assert not half.exact and half.graded == 0.5 and half.kind_right


def test_a_wrong_extra_culprit_costs_as_much_as_a_right_one_gains():
    s = run(verdict(culprits=(A, B, C)))
    assert not s.exact and s.graded == 0.5 and s.extra == [C]


def test_a_short_sha_names_the_commit():
    assert run(verdict(ref=A[:10], culprits=(A[:10], B[:12]))).exact


def test_the_wrong_kind_scores_nothing():
    s = run(verdict(kind="uncommitted", ref="python/x/topk.py", culprits=()))
    assert not s.kind_right and s.graded == 0.0


def test_none_is_right_only_when_nothing_regressed():
    truth = {"scenario": "n", "kind": "none", "root_causes": [], "red_herrings": []}
    assert run(verdict(kind="none", ref="", culprits=()), truth).exact
    assert run(verdict(kind="none", ref="", culprits=()), truth).probes_over_bound is None
    assert not run(verdict(), truth).exact


def test_probes_against_the_bisection_bound():
    s = run(verdict(culprits=(A, B), probes=7), candidates=64)
    assert s.bound == 7 and s.probes_over_bound == 1.0


def test_a_red_herring_called_supported_is_counted():
    hyps = [
        {
            "category": "uncommitted",
            "statement": "the uncommitted change to python/x/topk.py slows it",
            "status": "supported",
        }
    ]
    assert run(verdict(hyps=hyps)).wrongly_supported == ["python/x/topk.py"]


def test_the_right_action_and_the_approval_gate():
    good = {"kind": "revert", "ref": A, "status": "pending"}
    assert run(verdict(culprits=(A, B), action=good)).action_right
    assert not run(verdict(action={"kind": "revert", "ref": C})).action_right
    mutation = {"seq": 3, "kind": "tool_call", "text": "", "payload": json.dumps({"name": "git_land_revert"})}
    approval = {"seq": 2, "kind": "approval", "text": "", "payload": json.dumps({"approved": True})}
    assert run(verdict(), events=[approval, mutation]).approval_before_mutation
    assert not run(verdict(), events=[mutation]).approval_before_mutation
    assert not run(verdict(), intact=False).repo_intact


def test_external_is_right_only_as_external_naming_nothing_with_a_person_to_investigate():
    truth = {"scenario": "h", "kind": "external", "root_causes": [], "red_herrings": []}
    look = {"kind": "investigate", "ref": None}
    right = run(verdict(kind="external", ref="", culprits=(), action=look), truth)
    assert right.exact and right.kind_right and right.action_right
    assert not run(verdict(kind="none", ref="", culprits=()), truth).exact  # "no regression" on a real drop
    assert not run(verdict(), truth).exact  # a commit blamed for the host


def test_a_revert_a_person_must_make_is_the_right_action_when_it_names_the_culprit():
    """When the culprit's revert conflicts with later work (or cannot be built), the hunt proposes
    ``investigate`` on the culprit: right, as a revert of it would be; on another commit, wrong."""
    one = {"scenario": "one", "kind": "commit", "root_causes": [{"kind": "commit", "ref": A}], "red_herrings": []}
    assert run(verdict(action={"kind": "investigate", "ref": A}), one).action_right
    assert run(verdict(action={"kind": "revert", "ref": A}), one).action_right
    assert not run(verdict(action={"kind": "investigate", "ref": B}), one).action_right
    assert not run(verdict(action={"kind": "restore", "ref": A}), one).action_right


def test_a_package_is_named_by_its_pep503_name_not_as_written():
    truth = {"scenario": "dep", "kind": "dependency", "root_causes": [{"kind": "dependency", "ref": "foo_bar"}]}
    pin = {"kind": "pin", "ref": "Foo.Bar==1.0", "status": "pending"}
    s = run(verdict(kind="dependency", ref="foo-bar", culprits=(), action=pin), truth=truth)
    assert s.exact and s.action_right
    other = run(verdict(kind="dependency", ref="foo-baz", culprits=(), action=pin), truth=truth)
    assert not other.exact


def test_names_other_than_packages_are_compared_as_written():
    truth = {"scenario": "env", "kind": "env", "root_causes": [{"kind": "env", "ref": "NCCL_ALGO"}]}
    assert run(verdict(kind="env", ref="NCCL_ALGO", culprits=()), truth=truth).exact
    assert not run(verdict(kind="env", ref="nccl-algo", culprits=()), truth=truth).exact
