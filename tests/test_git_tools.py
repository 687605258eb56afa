"""Git reads give the same answers locally (GitPython) and over SSH (git CLI); probes leave the
user's checkout, index, stash and refs exactly as they were."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from evals.fingerprint import fingerprint
from tests.conftest import bench_repo
from tools.git import WORKTREE_PREFIX, CliGit, GitError, LocalGit


@pytest.fixture
def both(seed_scenario, ssh_host):
    return LocalGit(seed_scenario.repo), CliGit(seed_scenario.repo, ssh_host)


def test_reads_are_identical_locally_and_over_ssh(both, seed_scenario):
    local, remote = both
    good = seed_scenario.good_sha
    for read in (
        lambda g: g.status(),
        lambda g: g.log(f"{good}..HEAD"),
        lambda g: g.log("HEAD", max_count=5, first_parent=True),
        lambda g: g.reflog(),
        lambda g: g.diff_stat(),
        lambda g: g.diff_stat(good, "HEAD"),
        lambda g: g.show_stat("HEAD~3"),
        lambda g: g.merge_base("HEAD", good),
    ):
        assert read(local) == read(remote)


def test_the_reflog_exposes_the_silent_pull(both, seed_scenario):
    for g in both:
        pull = g.reflog()[0]
        assert pull.action == "pull origin main: Fast-forward" and pull.command == "pull"
        assert (pull.old_sha, pull.new_sha) == (seed_scenario.good_sha, seed_scenario.head_sha)
        assert pull.time.endswith("+00:00")


def test_status_separates_staged_unstaged_and_untracked(tmp_path):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("a", "b"):
        (repo / name).write_text(name)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), *ident, "commit", "-qm", "init"], check=True)
    (repo / "a").write_text("changed")
    (repo / "b").write_text("staged")
    subprocess.run(["git", "-C", str(repo), "add", "b"], check=True)
    (repo / "new dir").mkdir()
    (repo / "new dir" / "c").write_text("c")
    for g in (LocalGit(repo), CliGit(repo)):
        st = g.status()
        assert (st.staged, st.unstaged, st.untracked) == (["b"], ["a"], ["new dir/c"])
        assert not st.clean and st.branch in ("main", "master")


def test_show_stat_names_the_files_of_the_culprit(both, seed_scenario):
    for g in both:
        show = g.show_stat(seed_scenario.truth["root_causes"][0]["ref"])
        assert show.commit.subject == "Fix PCG MoE Error (#17739)"
        assert "fence the streams" in show.body
        assert [Path(f.path).name for f in show.stat.files] == [
            "compile.py",
            "piecewise_context_manager.py",
            "custom_all_reduce.py",
            "parallel_state.py",
            "pynccl.py",
        ]
        assert show.stat.deletions == 0 and show.stat.insertions == 60


def test_snapshot_worktree_and_revert_leave_the_users_repo_untouched(both, seed_scenario):
    before = fingerprint(seed_scenario.repo)
    for g in both:
        snap = g.snapshot()
        assert snap != seed_scenario.head_sha
        assert g.snapshot() == snap  # content-addressed: the same work, the same commit
        # The snapshot carries the uncommitted patches: the same diff as the working tree.
        assert g.diff_stat(seed_scenario.head_sha, snap) == g.diff_stat()
        with g.worktree(snap) as wt:
            assert "is_sm120_supported()" in Path(wt, "python/minisglang/server_args.py").read_text()
        assert not Path(wt).exists()
        plan = g.prepare_revert(seed_scenario.truth["root_causes"][0]["ref"])
        assert not plan.conflict and plan.stat.insertions == 0 and plan.stat.deletions == 60
        assert g.log(plan.revert_sha, max_count=1)[0].subject.startswith('Revert "Fix PCG MoE Error')
    assert fingerprint(seed_scenario.repo) == before
    wt_list = subprocess.run(
        ["git", "-C", str(seed_scenario.repo), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert len(wt_list.splitlines()) == 1


def _worktree_count(repo: Path) -> int:
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True)
    return len(out.stdout.splitlines())


def _lock_as_git_worktree_add_does(repo: Path, wt: str) -> None:
    """``git worktree add`` locks a new worktree ("initializing") until its checkout is done; a
    SIGTERM in between leaves it locked, and a locked worktree survives ``remove --force``."""
    admin = subprocess.run(
        ["git", "-C", wt, "rev-parse", "--absolute-git-dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(admin, "locked").write_text("initializing")


def test_a_worktree_interrupted_while_git_was_adding_it_is_still_removed(seed_scenario):
    # Found in CI: the service killed mid-hunt, the hunt's SIGTERM landed inside `git worktree add`,
    # and a second worktree stayed listed after the hunt had cleaned up.
    g = LocalGit(seed_scenario.repo)
    with pytest.raises(KeyboardInterrupt), g.worktree("HEAD") as wt:
        _lock_as_git_worktree_add_does(seed_scenario.repo, wt)
        raise KeyboardInterrupt("signal 15")
    assert not Path(wt).exists() and _worktree_count(seed_scenario.repo) == 1


def test_a_worktree_whose_removal_a_signal_cut_short_is_removed_when_the_measurer_closes(seed_scenario, tmp_path):
    # Found in CI: the service killed mid-hunt, the hunt's SIGTERM landed while it was removing a
    # retired state's worktree; the exit stack had already let go of it, and it stayed listed
    # after the hunt had gone.
    from contextlib import ExitStack

    from tools.host import LocalHost
    from tools.measure import Measurer

    g = LocalGit(seed_scenario.repo)
    measurer = Measurer(LocalHost(), g, tmp_path / "logs", pid_dir=tmp_path / "servers")
    stack = ExitStack()
    wt = stack.enter_context(g.worktree("HEAD"))
    drop = g._drop_worktree

    def interrupted(path: str) -> None:
        g._drop_worktree = drop  # the signal lands once
        raise KeyboardInterrupt("signal 15")

    g._drop_worktree = interrupted
    with pytest.raises(KeyboardInterrupt):
        stack.close()
    stack.close()  # closing it again does nothing: its callbacks are gone
    assert Path(wt).exists()
    measurer.close()
    assert not Path(wt).exists() and _worktree_count(seed_scenario.repo) == 1


def test_a_locked_worktree_of_a_killed_process_is_removed_by_the_next_start(seed_scenario):
    dead = subprocess.Popen(["true"])
    dead.wait()
    wt = f"{WORKTREE_PREFIX}{dead.pid}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["git", "-C", str(seed_scenario.repo), "worktree", "add", "--detach", "-q", wt, "HEAD"], check=True)
    _lock_as_git_worktree_add_does(seed_scenario.repo, wt)
    assert LocalGit(seed_scenario.repo).remove_stale_worktrees() == [wt]
    assert not Path(wt).exists() and _worktree_count(seed_scenario.repo) == 1


def test_landing_a_revert_only_adds_a_branch(seed_scenario, tmp_path):
    repo = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(seed_scenario.repo), str(repo)], check=True)
    g = LocalGit(repo)
    plan = g.prepare_revert(seed_scenario.truth["root_causes"][0]["ref"])
    before = fingerprint(repo)
    branch = g.land_revert(plan)
    after = fingerprint(repo)
    assert branch.startswith("sleuth/revert-") and g.rev_parse(branch) == plan.revert_sha
    assert after["files"] == before["files"] and after["index"] == before["index"]
    assert after["HEAD"] == before["HEAD"] and after["refs"] != before["refs"]


def test_a_conflicting_revert_is_reported_not_forced(tmp_path):
    repo = tmp_path / "r"
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i, text in enumerate(["one\n", "two\n", "three\n"]):
        (repo / "f").write_text(text)
        subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
        subprocess.run(["git", "-C", str(repo), *ident, "commit", "-qm", f"c{i}"], check=True)
    plan = LocalGit(repo).prepare_revert("HEAD~1")
    assert plan.conflict and plan.revert_sha is None and plan.conflicting_files == ["f"]


def _fork_with_a_culprit_and_a_later_changelog(tmp_path) -> tuple[Path, str, Callable[..., str]]:
    """The culprit changes ``lib.py`` and a CHANGELOG line that a later commit (a fork's note)
    rewrites: its revert conflicts in CHANGELOG only. Returns (repo, culprit, its ``git``)."""
    repo, git, _good = bench_repo(tmp_path / "r", files={"lib.py": "COST = 1.0\n", "CHANGELOG": "- nothing yet\n"})
    (repo / "lib.py").write_text("COST = 2.0\n")
    (repo / "CHANGELOG").write_text("- cost doubled\n")
    git("commit", "-qam", "Double the cost")
    culprit = git("rev-parse", "HEAD")
    (repo / "CHANGELOG").write_text("- cost doubled (fork note)\n")
    git("commit", "-qam", "Fork note")
    return repo, culprit, git


def test_a_revert_that_conflicts_only_in_files_it_may_keep_reverts_the_rest(tmp_path):
    """A trial's fork: the culprit's revert conflicted in CHANGELOG and a test, neither executed,
    and the hunt ended "revert by hand (nothing to approve)". The files named in ``keep`` stay as
    at HEAD, the rest is reverted, and the commit says which were kept."""
    repo, culprit, git = _fork_with_a_culprit_and_a_later_changelog(tmp_path)
    before = fingerprint(repo)
    g = LocalGit(repo)
    assert g.prepare_revert(culprit).conflict  # a whole revert cannot be made
    plan = g.prepare_revert(culprit, keep=["CHANGELOG"])
    assert not plan.conflict and plan.kept == ["CHANGELOG"] and plan.revert_sha
    assert git("show", f"{plan.revert_sha}:lib.py") == "COST = 1.0"
    assert git("show", f"{plan.revert_sha}:CHANGELOG") == "- cost doubled (fork note)"
    body = git("log", "-1", "--format=%B", plan.revert_sha)
    assert body.startswith('Revert "Double the cost"') and "Conflicts" not in body
    assert "Left as they were (CHANGELOG): the revert conflicts there" in body
    assert fingerprint(repo) == before  # no ref, file or index of the user's moved


def test_a_revert_that_also_conflicts_in_a_file_not_in_keep_is_not_forced(tmp_path):
    repo, culprit, git = _fork_with_a_culprit_and_a_later_changelog(tmp_path)
    (repo / "lib.py").write_text("COST = 3.0\n")
    git("commit", "-qam", "Triple it")
    plan = LocalGit(repo).prepare_revert(culprit, keep=["CHANGELOG"])
    assert plan.conflict and plan.revert_sha is None and plan.conflicting_files == ["CHANGELOG", "lib.py"]
    assert plan.kept == []


def test_bad_refs_and_paths_name_what_is_wrong(both, tmp_path, ssh_host):
    for g in both:
        with pytest.raises(GitError, match="unknown ref 'no-such-branch'"):
            g.rev_parse("no-such-branch")
        with pytest.raises(GitError, match="unknown ref '--output=/tmp/x'"):
            g.log("--output=/tmp/x")
    with pytest.raises(GitError, match="is not a git repository"):
        LocalGit(tmp_path)
    with pytest.raises(GitError, match="is not a git repository"):
        CliGit(tmp_path, ssh_host)
