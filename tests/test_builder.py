"""``build`` writes a real git repo whose history, reflog and working tree tell the seeds' story."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from evals.lab.builder import LabError, build
from evals.lab.demo import SEED_SPEC
from evals.lab.spec import load_spec
from tests.conftest import MINIMAL_SPEC


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_the_same_spec_builds_the_same_shas(tmp_path):
    spec = load_spec(SEED_SPEC)
    a, b = build(spec, tmp_path / "a"), build(spec, tmp_path / "b")
    assert (a.good_sha, a.head_sha) == (b.good_sha, b.head_sha)
    assert git(a.repo, "log", "--format=%H %an %ad") == git(b.repo, "log", "--format=%H %an %ad")
    assert git(a.repo, "stash", "create") != ""  # uncommitted work is there in both...
    assert git(a.repo, "diff", "HEAD") == git(b.repo, "diff", "HEAD")  # ...and identical


def test_the_reflog_records_a_fast_forward_pull_from_the_good_sha(seed_scenario):
    entries = git(seed_scenario.repo, "reflog", "--format=%H %gs").splitlines()
    newest_sha, newest_msg = entries[0].split(" ", 1)
    assert newest_msg == "pull origin main: Fast-forward"
    assert newest_sha == seed_scenario.head_sha
    assert entries[1].split(" ", 1)[0] == seed_scenario.good_sha == seed_scenario.pre_pull_sha
    pulled = git(seed_scenario.repo, "log", "--format=%s", f"{seed_scenario.good_sha}..HEAD").splitlines()
    assert len(pulled) == 7
    assert "Fix PCG MoE Error (#17739)" in pulled


def test_the_culprit_commit_touches_the_five_files_of_the_seed(seed_scenario):
    truth = json.loads((seed_scenario.root / "truth.json").read_text())
    (cause,) = truth["root_causes"]
    assert cause["kind"] == "commit" and len(cause["ref"]) == 40
    files = git(seed_scenario.repo, "show", "--format=", "--name-only", cause["ref"]).split()
    assert sorted(Path(f).name for f in files) == [
        "compile.py",
        "custom_all_reduce.py",
        "parallel_state.py",
        "piecewise_context_manager.py",
        "pynccl.py",
    ]
    diff = git(seed_scenario.repo, "show", cause["ref"], "--", "python/minisglang/distributed/pynccl.py")
    assert '+        torch.cuda.launch("nccl_stream_fence", batch.work())' in diff


def test_the_debuggers_patches_are_uncommitted_in_the_working_tree(seed_scenario):
    status = git(seed_scenario.repo, "status", "--porcelain").splitlines()
    modified = sorted(line[3:] for line in status if line.startswith(" M"))
    assert sorted(Path(p).name for p in modified) == [
        "deepseek_v2.py",
        "engine.py",
        "flashinfer_mla_backend.py",
        "kimi_k25.py",
        "llama_eagle3.py",
        "scheduler.py",
        "server_args.py",
        "topk.py",
    ]
    stat = git(seed_scenario.repo, "diff", "--stat", "HEAD")
    assert "topk.py               | 93 +" in stat
    sm120 = git(seed_scenario.repo, "diff", "HEAD", "--", "python/minisglang/server_args.py")
    assert "+            if is_sm100_supported() or is_sm120_supported():" in sm120


def test_the_truth_never_enters_the_repo(seed_scenario):
    assert (seed_scenario.root / "truth.json").is_file()
    assert not list(seed_scenario.repo.rglob("truth.json"))
    assert not list(seed_scenario.repo.rglob("alert.json"))
    tracked_and_untracked = git(seed_scenario.repo, "ls-files", "--cached", "--others").split()
    for rel in tracked_and_untracked:
        text = (seed_scenario.repo / rel).read_text()
        assert "culprit" not in text.lower() and "red herring" not in text.lower(), rel
        assert "# @site" not in text, rel


def test_truth_lists_every_red_herring_with_its_ref(seed_scenario):
    truth = json.loads((seed_scenario.root / "truth.json").read_text())
    kinds = {(h["kind"], h["ref"]) for h in truth["red_herrings"]}
    assert ("uncommitted", "python/minisglang/layers/moe/topk.py") in kinds
    assert ("env", "NCCL_PROTO") in kinds
    assert sum(1 for k, _ in kinds if k == "commit") == 6
    assert truth["kind"] == "commit"


def test_the_alert_is_an_alertmanager_v4_payload_with_commands(seed_scenario):
    alert = json.loads((seed_scenario.root / "alert.json").read_text())
    assert alert["version"] == "4" and alert["status"] == "firing"
    (a,) = alert["alerts"]
    assert a["labels"]["host"] == "gpu-node-1" and a["labels"]["mode"] == "eagle3"
    ann = a["annotations"]
    assert (ann["good_value"], ann["bad_value"]) == ("94", "60")
    assert "{worktree}/scripts/launch_server.sh" in ann["launch_command"] and "{port}" in ann["launch_command"]
    assert "--speculative-algorithm EAGLE3" in ann["launch_command"]
    assert ann["benchmark_command"].startswith("sleuth bench --endpoint http://127.0.0.1:{port}/v1")


def test_the_host_has_a_sitecustomize_that_sets_the_nccl_vars(seed_scenario):
    site = (seed_scenario.host / "sitecustomize" / "sitecustomize.py").read_text()
    for var in ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL"):
        assert f"os.environ.setdefault('{var}'" in site
    out = subprocess.run(
        ["bash", "-c", f". {seed_scenario.host}/env.sh && python3 -c 'import os; print(os.environ[\"NCCL_PROTO\"])'"],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "LL"


def test_a_non_empty_target_is_refused_and_left_alone(tmp_path, write_spec):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(LabError, match="not an empty directory"):
        build(load_spec(write_spec(MINIMAL_SPEC)), target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_a_failing_build_leaves_nothing_behind(tmp_path, write_spec):
    # Three slowdowns at one site: the lab has only two recipes there, so the build fails midway.
    extra = "\n".join(
        f'[[pulled]]\nsubject = "fence {i}"\nedits = [{{ path = "python/minisglang/distributed/pynccl.py", '
        f'effect = {{ cost = "allreduce_eager", add_us = 5 }} }}]'
        for i in range(2)
    )
    spec = load_spec(write_spec(MINIMAL_SPEC + "\n" + extra))
    with pytest.raises(LabError, match="more slowdowns"):
        build(spec, tmp_path / "out")
    assert list(tmp_path.iterdir()) == [tmp_path / "spec.toml"]


def test_local_commits_and_a_good_ref_in_the_alert(tmp_path, write_spec):
    text = MINIMAL_SPEC.replace("[[pulled]]", "[[committed]]").replace("bad = 70", "bad = 70\ngive_good_ref = true")
    res = build(load_spec(write_spec(text)), tmp_path / "out")
    assert res.pre_pull_sha is None
    reflog = git(res.repo, "reflog", "--format=%gs").splitlines()
    assert reflog[0].startswith("commit: ") and "pull origin main: Fast-forward" not in reflog
    alert = json.loads((res.root / "alert.json").read_text())
    assert alert["commonAnnotations"]["good_ref"] == res.good_sha


def test_a_changed_launch_flag_is_a_config_change_with_both_commands_in_the_alert(tmp_path, write_spec):
    text = MINIMAL_SPEC.replace('culprits = ["slow"]', 'culprits = ["launch"]') + (
        '\n[launch]\nflags = ["--disable-cuda-graph"]\ngood_flags = []\n'
    )
    res = build(load_spec(write_spec(text)), tmp_path / "cfg")
    truth = json.loads((res.root / "truth.json").read_text())
    assert truth["kind"] == "config"
    assert truth["root_causes"][0]["ref"] == "--disable-cuda-graph"
    ann = json.loads((res.root / "alert.json").read_text())["commonAnnotations"]
    assert ann["launch_command"].endswith("--port {port} --disable-cuda-graph")
    assert ann["good_launch_command"].endswith("--port {port}")
