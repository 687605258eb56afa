"""The harness's check for what a run left behind finds a server by what marks it as the
scenario's (its environment, its working directory), not by its command line, which names
neither; and a scratch worktree by where its ``.git`` points, even with the scenario deleted.
Each check is shown to fail on a planted leftover."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from evals.fingerprint import leftovers
from tests.conftest import git_in, wait_for
from tools.git import WORKTREE_PREFIX


def _scenario(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "scenario"
    repo = root / "repo"
    repo.mkdir(parents=True)
    git = git_in(repo)
    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-qm", "init")
    return root, repo


def _plant(env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """A 'server' as the lab starts one: its own session, a command line naming no path."""
    return subprocess.Popen(
        ["sleep", "300"], env={**os.environ, **env}, cwd=cwd, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _gone(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_server_marked_only_by_its_environment_is_found(tmp_path):
    root, repo = _scenario(tmp_path)
    assert leftovers(root, repo) == ([], [])
    proc = _plant({"MINISGLANG_MODELS": str(root / "host" / "models")}, cwd=tmp_path)
    try:
        assert str(root) not in " ".join(proc.args)  # what the old check read: it named nothing
        wait_for(lambda: leftovers(root, repo)[0], 10, "the planted server to be seen")
        servers, _ = leftovers(root, repo)
        assert len(servers) == 1 and servers[0].startswith(f"{proc.pid} sleep 300")
    finally:
        _gone(proc)
    assert leftovers(root, repo) == ([], [])
    # Another scenario whose path only starts like this one's is not this one's.
    other = _plant({"MINISGLANG_MODELS": f"{root}2/host/models"}, cwd=tmp_path)
    try:
        time.sleep(0.2)
        assert leftovers(root, repo) == ([], [])
    finally:
        _gone(other)


def test_a_process_in_a_scratch_worktree_and_the_worktree_are_found_with_the_scenario_deleted(tmp_path):
    root, repo = _scenario(tmp_path)
    wt = Path(f"{WORKTREE_PREFIX}test-{uuid.uuid4().hex[:8]}")
    git_in(repo)("worktree", "add", "--detach", "--quiet", str(wt), "HEAD")
    proc = _plant({}, cwd=wt)
    try:
        wait_for(lambda: leftovers(root, repo)[0], 10, "the server in the worktree to be seen")
        assert leftovers(root, repo)[1] == [str(wt)]
        shutil.rmtree(root)  # the scenario folder deleted: the worktree and the process remain
        servers, trees = leftovers(root, repo)
        assert trees == [str(wt)] and [s.split()[0] for s in servers] == [str(proc.pid)]
    finally:
        _gone(proc)
        shutil.rmtree(wt, ignore_errors=True)
    assert leftovers(root, repo) == ([], [])
