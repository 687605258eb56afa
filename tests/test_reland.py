"""The cause at HEAD, in histories that are not monotonic: a step a later commit reverted is
history, and the search goes on past the revert to the commit that is slow at HEAD (a re-land,
a revert of the fix)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import bench_repo
from tools.git import CliGit


def _repo(tmp_path: Path) -> tuple[Path, Callable[..., str]]:
    """A benchmark-command project whose ``lib.py`` holds the cost and imports ``util.py``, which
    the harmless commits touch (executed, so not pruned; apart from the cost's line, so reverts
    apply)."""
    repo, git, _ = bench_repo(
        tmp_path / "proj",
        files={"lib.py": "import util\nCOST = 1.0\n", "util.py": '"""Helpers the benchmark imports."""\n'},
    )
    return repo, git


def _commit(repo: Path, git, text: str, subject: str) -> str:
    (repo / "lib.py").write_text("import util\n" + text)
    git("commit", "-qam", subject)
    return git("rev-parse", "HEAD")


def _touch(repo: Path, git, n: int, tag: str) -> None:
    """``n`` harmless commits to a file the benchmark executes (not pruned)."""
    for i in range(n):
        (repo / "util.py").write_text((repo / "util.py").read_text() + f"# {tag} {i}\n")
        git("commit", "-qam", f"{tag} {i}")


def _revert(git, sha: str) -> str:
    git("revert", "--no-edit", sha)
    return git("rev-parse", "HEAD")


def test_the_commits_that_revert_a_commit_are_found_by_their_message(tmp_path):
    repo, git = _repo(tmp_path)
    slow = _commit(repo, git, "COST = 2.0\n", "slower")
    _touch(repo, git, 2, "tidy")
    undo = _revert(git, slow)
    redo = _revert(git, undo)
    g = CliGit(repo)
    assert [c.sha for c in g.reverts_of(slow)] == [undo]  # the revert of the revert reverts ``undo``
    assert [c.sha for c in g.reverts_of(undo)] == [redo]
    assert g.reverts_of(redo) == []
    # A message naming another commit that shares the first seven digits is not a revert of it.
    git("commit", "-q", "--allow-empty", "-m", "x", "-m", f"This reverts commit {slow[:7]}0000000.")
    assert [c.sha for c in g.reverts_of(slow)] == [undo]


def test_a_commit_that_deletes_a_commits_lines_without_saying_so_reverts_it(tmp_path):
    """No message names it, but it takes the slow line back out: an undo, which a re-land may
    follow. A commit that moves the line (deletes and adds it) does not undo it."""
    repo, git = _repo(tmp_path)
    slow = _commit(repo, git, "COST = 2.0  # walk the tree twice\n", "Fix get_real_name")
    (repo / "lib.py").write_text("import util\n\nCOST = 2.0  # walk the tree twice\n")
    git("commit", "-qam", "Blank line")  # moved down a line: still there
    _touch(repo, git, 2, "tidy")
    undo = _commit(repo, git, "COST = 1.0\n", "Update README.")
    g = CliGit(repo)
    assert [(c.sha, c.by) for c in g.reverts_of(slow)] == [(undo, "lines")]
    said = _revert(git, undo)  # now one that says so, and deletes the same line too: listed once
    assert [(c.sha, c.by) for c in g.reverts_of(undo)] == [(said, "message")]


def test_a_later_edit_of_a_commits_lines_to_something_else_does_not_revert_it(tmp_path):
    """A commit moved a pin from v1.8 to v1.8.11; a later one moved it on to v1.13.0. It deletes
    every line the first added, but brings back none of those it replaced: no undo (a toolz
    trial's hunt said "d06cfd7bb7 reverts it" and labelled that state "reverted"). Putting v1.8
    back is one; so is deleting what a commit only added."""
    repo, git = _repo(tmp_path)
    _commit(repo, git, "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.8'\n", "Publish with the action")
    pin = _commit(repo, git, "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.8.11'\n", "Oops update to v1.8.1")
    _touch(repo, git, 1, "tidy")
    _commit(repo, git, "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.13.0'\n", "Modernize to use pyproject.toml")
    assert CliGit(repo).reverts_of(pin) == []
    back = _commit(repo, git, "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.8.11'\n", "Go back to 1.8.11")
    undo = _commit(repo, git, "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.8'\n", "Pin what worked")
    assert [(c.sha, c.by) for c in CliGit(repo).reverts_of(pin)] == [(undo, "lines")]
    assert CliGit(repo).reverts_of(back) == []  # it put back v1.8, not the v1.13.0 ``back`` replaced
    kept = "COST = 1.0\nPIN = 'gh-action-pypi-publish@v1.8'\n"
    added = _commit(repo, git, kept + "TRACE = 'walk the tree twice'\n", "Add a trace")
    gone = _commit(repo, git, kept, "README update")
    assert [(c.sha, c.by) for c in CliGit(repo).reverts_of(added)] == [(gone, "lines")]


# A change reverted and re-landed, and a fix that was itself reverted: the worlds "reland" and
# "fix_reverted" (tests/worlds.py), replayed from their recordings in the default run
# (tests/test_recorded.py) and hunted live in the slow step (tests/test_live_worlds.py).


# A partial revert that measures no better, and a later fix that gives most of a step back, are
# the recorded worlds partial_revert and mostly_given_back of tests/worlds.py: replayed in the
# default run, hunted live in the slow step.


def test_two_probed_commits_of_one_tree_are_labelled_as_one_measurement():
    """The measurement cache is by tree: a commit whose tree another probed commit had (a revert
    back to an earlier state, a merge and its parent) gets that one's samples. Its row says so,
    where two rows of the same numbers stood unexplained."""
    from agent.categories.history import _keep_probes
    from agent.state import Hunt, Target

    kept: list[tuple[str, str]] = []

    class Recorder:
        def record_samples(self, hunt, label, ref, samples):
            kept.append((label, ref))

    a, b, c = "a" * 40, "b" * 40, "c" * 40
    _keep_probes(Hunt(run_id="r", target=Target(repo="/r")), Recorder(), {a: [1.0, 1.1], b: [2.0, 2.1], c: [1.0, 1.1]})
    assert kept == [("bisect aaaaaaaa", a), ("bisect bbbbbbbb", b), ("bisect cccccccc (same tree as aaaaaaaa)", c)]


def test_a_diffs_lines_are_read_by_file_with_headers_only_before_hunks():
    """A deleted line that began with "--" (SQL, Lua) is content, not a file header; a deleted
    file's lines count under its old path."""
    from tools.git import _diff_lines

    diff = "\n".join(
        [
            "diff --git a/a.sql b/a.sql", "--- a/a.sql", "+++ b/a.sql", "@@ -1,2 +1,1 @@",
            "--- a comment line deleted", "-select 1;", "+select 2;",
            "diff --git a/gone.py b/gone.py", "--- a/gone.py", "+++ /dev/null", "@@ -1 +0,0 @@", "-x = slow_call()",
            "diff --git a/new.py b/new.py", "--- /dev/null", "+++ b/new.py", "@@ -0,0 +1 @@", "+y = 1",
        ]
    )  # fmt: skip
    assert _diff_lines(diff, "-") == {
        ("a.sql", "-- a comment line deleted"), ("a.sql", "select 1;"), ("gone.py", "x = slow_call()")
    }  # fmt: skip
    assert _diff_lines(diff, "+") == {("a.sql", "select 2;"), ("new.py", "y = 1")}
