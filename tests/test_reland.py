"""The cause at HEAD, in histories that are not monotonic: a step a later commit reverted is
history, and the search goes on past the revert to the commit that is slow at HEAD (a re-land,
a revert of the fix)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import bench_repo, hunt_bench
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


# A change reverted and re-landed, and a fix that was itself reverted: the worlds "reland" and
# "fix_reverted" (tests/worlds.py), replayed from their recordings in the default run
# (tests/test_recorded.py) and hunted live in the slow step (tests/test_live_worlds.py).


def test_a_revert_that_does_not_measure_better_leaves_the_culprit_standing(tmp_path):
    """A commit says it reverts the slow one but undoes nothing of its cost (a partial revert):
    the step it was meant to undo is still the cause at HEAD."""
    repo, git = _repo(tmp_path)
    good = git("rev-parse", "HEAD")
    slow = _commit(repo, git, "COST = 2.0\n", "slower")
    _touch(repo, git, 2, "tidy")
    (repo / "notes.txt").write_text("reverted the logging part only\n")
    git("add", "notes.txt")
    git("commit", "-qm", 'Revert "slower" (partly)', "-m", f"This reverts commit {slow}.")
    _touch(repo, git, 2, "docs")
    v = hunt_bench(repo, good, tmp_path / "r.db")
    assert v["root_cause"]["ref"] == slow and v["undone"] == [], v["summary"]
    history = next(h for h in v["hypotheses"] if h["category"] == "history")
    assert "reverts it, but does not measure better than HEAD" in history["reason"]


def test_a_step_a_later_fix_mostly_gave_back_is_named_with_how_much_is_left_at_head(tmp_path):
    """Not a revert: a later commit takes most of the step back (mlx-lm's #674 took #626's 2.8x
    TTFT to +8 %). The first bad commit is still the culprit, but the summary says its step is
    several times what is left at HEAD, so nobody reverts it expecting the step back."""
    repo, git = _repo(tmp_path)
    good = git("rev-parse", "HEAD")
    _touch(repo, git, 1, "tidy")
    slow = _commit(repo, git, "COST = 3.0\n", "Batch every request")
    _touch(repo, git, 2, "more")
    _commit(repo, git, "COST = 1.3\n", "Poll less often")  # gives back most of it, not a revert
    _touch(repo, git, 1, "docs")
    v = hunt_bench(repo, good, tmp_path / "r.db")
    assert v["root_cause"]["ref"] == slow and v["undone"] == [], v["summary"]
    assert "what is left at HEAD" in v["summary"] and "later commits gave back" in v["summary"], v["summary"]
    back = int(v["summary"].split("later commits gave back ")[1].split("%")[0])
    assert 75 <= back <= 95  # (3.0 - 1.3) / (3.0 - 1.0): 85 %, give or take the noise
