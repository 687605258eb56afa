"""Measurement of repository states (cached, interleaved A/B) and the typed tool registry."""

from __future__ import annotations

import json

import pytest

import tools.catalog as catalog
from evals.lab.measure import baseline_command, scenario_bench_config
from tools.bisect import ProbeError
from tools.git import LocalGit
from tools.host import LocalHost
from tools.measure import Measurer, State, Workload
from tools.registry import REGISTRY, call, schemas


@pytest.fixture(scope="module")
def lab(seed_scenario, tmp_path_factory):
    ann, bench = scenario_bench_config(seed_scenario.root)
    workload = Workload(bench=bench.model_copy(update={"requests": 2, "max_tokens": 24}))
    measurer = Measurer(LocalHost(), LocalGit(seed_scenario.repo), tmp_path_factory.mktemp("m"))
    return seed_scenario, ann, workload, measurer


def test_a_state_is_measured_once_and_topped_up_later(lab):
    scen, ann, workload, m = lab
    state = State(label="good", ref=scen.good_sha, launch=ann["launch_command"])
    first = m.measure(state, workload, 3)
    again = m.measure(state.model_copy(update={"label": "same-tree"}), workload, 3)
    assert again.samples == first.samples and again.launches == 1  # cache hit: nothing launched
    more = m.measure(state, workload, 5)
    assert more.samples[:3] == first.samples and len(more.samples) == 5 and more.launches == 2
    assert len(first.tree) == 40 and first.tree != scen.good_sha  # keyed by the tree, not the commit


def test_a_commits_tree_is_asked_of_git_once(tmp_path, tiny):
    """Every cache lookup needs the state's tree; over SSH each git call costs a round trip."""
    repo, good = tiny
    git = LocalGit(repo)
    asked: list[str] = []
    real = git.tree_hash
    git.tree_hash = lambda ref: asked.append(ref) or real(ref)  # type: ignore[method-assign]
    m = Measurer(LocalHost(), git, tmp_path / "logs")
    workload = Workload(command="python3 bench.py", metric="value")
    state = State(label="good", ref=good, launch="")
    m.measure(state, workload, 3)
    m.measure(state, workload, 4)
    m.probe_fn("", workload)(good, 2)
    assert asked == [good]


def test_interleaved_ab_separates_good_from_bad_and_alternates(lab):
    scen, ann, workload, m = lab
    order: list[str] = []
    a = State(label="A-good", ref=scen.good_sha, launch=ann["launch_command"])
    b = State(label="B-head", ref=scen.head_sha, launch=ann["launch_command"])
    own = Workload(bench=workload.bench.model_copy(update={"max_tokens": 20}))  # nothing cached for it
    cmp, ma, mb = m.compare_states(a, b, own, samples=5, on_sample=lambda label, _v: order.append(label))
    assert cmp.verdict == "different" and cmp.delta_pct < -20
    assert order[:4] == ["A-good", "B-head", "A-good", "B-head"]
    assert ma.launches == 1 and mb.launches == 1  # warm servers, one launch each, across doubling rounds


def test_a_state_that_does_not_launch_is_a_probe_error(lab):
    scen, _ann, workload, m = lab
    broken = State(label="broken", ref=scen.good_sha, launch="echo 'cannot start'; exit 1")
    with pytest.raises(ProbeError, match="does not launch"):
        m.measure(broken, workload, 2)


def test_every_tool_is_typed_and_classed():
    assert {
        "git_status",
        "git_log",
        "git_reflog",
        "git_diff_stat",
        "git_show_stat",
        "git_merge_base",
        "git_snapshot",
        "git_prepare_revert",
        "git_land_revert",
        "nvidia_smi",
        "measure",
        "compare_states",
        "bisect",
        "bench",
        "run_command",
    } <= set(REGISTRY)
    assert {n for n, s in REGISTRY.items() if s.safety == "mutate"} == {"git_land_revert", "run_command"}
    for schema in schemas():
        json.dumps(schema)
        assert schema["function"]["parameters"]["type"] == "object" and schema["function"]["description"]


def test_calls_are_recorded_and_errors_are_data(seed_scenario, tmp_path):
    ctx = catalog.ToolContext(seed_scenario.repo, workdir=tmp_path)
    rec = call("git_reflog", {"limit": 1}, ctx)
    assert rec.ok and rec.result["entries"][0]["action"] == "pull origin main: Fast-forward"
    assert rec.duration_s > 0 and rec.safety == "read" and rec.started_at
    assert call("git_show_stat", {"ref": "nope"}, ctx).error == f"GitError: unknown ref 'nope' in {seed_scenario.repo}"
    assert call("git_log", {"max_count": 3}, ctx).error == "invalid arguments: rev_range: Field required"
    assert call("no_such_tool", {}, ctx).error == "unknown tool 'no_such_tool'"


def test_a_mutating_tool_refuses_without_approval(seed_scenario, tmp_path):
    ctx = catalog.ToolContext(seed_scenario.repo, workdir=tmp_path)
    rec = call("run_command", {"argv": ["touch", str(tmp_path / "x")]}, ctx)
    assert "needs their approval" in rec.error and not (tmp_path / "x").exists()
    rec = call("run_command", {"argv": ["touch", str(tmp_path / "x")]}, ctx, approved=True)
    assert rec.ok and (tmp_path / "x").exists()


def test_nvidia_smi_tool_reads_the_hosts_gpus(seed_scenario, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{seed_scenario.host / 'bin'}:{__import__('os').environ['PATH']}")
    rec = call("nvidia_smi", {}, catalog.ToolContext(seed_scenario.repo, workdir=tmp_path))
    assert rec.ok and len(rec.result["gpus"]) == 8
    assert rec.result["gpus"][0]["clocks.sm"] == "2310" and rec.result["gpus"][0]["pcie.link.gen.current"] == "5"


def test_measure_tool_snapshots_uncommitted_work(seed_scenario, tmp_path):
    ann, bench = scenario_bench_config(seed_scenario.root)
    ctx = catalog.ToolContext(seed_scenario.repo, workdir=tmp_path)
    args = {
        "state": {"label": "wt", "ref": "WORKTREE", "launch": baseline_command(ann["launch_command"])},
        "workload": {"bench": bench.model_copy(update={"requests": 1, "max_tokens": 16}).model_dump(mode="json")},
        "samples": 2,
    }
    rec = call("measure", args, ctx)
    assert rec.ok, rec.error
    assert rec.result["state"]["ref"] != seed_scenario.head_sha and len(rec.result["samples"]) == 2


def test_doubling_rounds_reuse_the_warm_servers(lab):
    scen, ann, workload, m = lab
    own = Workload(bench=workload.bench.model_copy(update={"max_tokens": 12}))
    a = State(label="A", ref=scen.good_sha, launch=ann["launch_command"])
    b = State(label="B", ref=scen.head_sha, launch=ann["launch_command"])
    # 2 vs 2 samples can never reach p <= 0.01, nor can 4 vs 4: two rounds, then the cap.
    cmp, ma, mb = m.compare_states(a, b, own, samples=2, max_samples=4)
    assert cmp.verdict == "unknown" and (cmp.n_a, cmp.n_b) == (4, 4)
    assert ma.launches == 1 and mb.launches == 1


def test_a_pair_is_topped_up_interleaved_on_one_server_each(lab):
    scen, ann, workload, m = lab
    own = Workload(bench=workload.bench.model_copy(update={"max_tokens": 18}))  # nothing cached for it
    a = State(label="pair-good", ref=scen.good_sha, launch=ann["launch_command"])
    b = State(label="pair-head", ref=scen.head_sha, launch=ann["launch_command"])
    m.measure(a, own, 2)  # a has two already; b has none
    ma, mb = m.measure_pair(a, b, own, 4)
    assert len(ma.samples) == 4 and len(mb.samples) == 4
    assert ma.launches == 2 and mb.launches == 1  # one warm server each for the top-up
    again_a, again_b = m.measure_pair(a, b, own, 4)
    assert again_a.samples == ma.samples and again_b.launches == 1  # enough already: nothing run
