"""Read a repository's state and prepare probes, locally (GitPython) or over a Host (git CLI).

Both backends return the same pydantic models for the same repository (the tests check this),
so the agent reasons identically about a checkout here and one on a GPU node over SSH.

Nothing here changes the user's checkout, index, stash or refs, except ``land_revert`` (a
``mutate`` tool, run only after a person approved it). Probes use scratch worktrees; the
snapshot of uncommitted work is a commit object written through a *temporary* index, so unlike
``git stash create`` it also carries untracked files, and the user's index is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from tools.host import Host, HostError, LocalHost, RunResult
from tools.pins import PinMove, is_pin_file, moves

ZERO_SHA = "0" * 40
WORKTREE_PREFIX = "/tmp/sleuth-wt-"
SLEUTH_IDENTITY = ["-c", "user.name=perf-sleuth", "-c", "user.email=perf-sleuth@localhost"]


class GitError(RuntimeError):
    """A git operation failed; the message names the repo and the ref or path."""


class GitStatus(BaseModel):
    branch: str | None  # None when HEAD is detached
    head_sha: str
    staged: list[str]
    unstaged: list[str]
    untracked: list[str]
    # Changed paths whose change cannot alter what runs, with why (``tools.codepath.inert_changes``:
    # comments and formatting of a Python file, documentation outside any package, CI settings);
    # None where not looked at (a recording made before it was).
    inert: dict[str, str] | None = None

    @property
    def clean(self) -> bool:
        return not (self.staged or self.unstaged or self.untracked)


class CommitInfo(BaseModel):
    sha: str
    parents: list[str]
    author: str
    author_email: str
    date: str  # ISO 8601 author date
    subject: str


class ReflogEntry(BaseModel):
    selector: str  # HEAD@{0}
    old_sha: str
    new_sha: str
    action: str  # the message, e.g. "pull origin main: Fast-forward"
    command: str  # its first word, e.g. "pull"
    time: str  # ISO 8601, UTC
    committer: str


class FileStat(BaseModel):
    path: str
    added: int | None  # None for binary files
    deleted: int | None


class DiffStat(BaseModel):
    files: list[FileStat]
    insertions: int
    deletions: int

    @classmethod
    def of(cls, files: list[FileStat]) -> DiffStat:
        files = sorted(files, key=lambda f: f.path)
        return cls(
            files=files, insertions=sum(f.added or 0 for f in files), deletions=sum(f.deleted or 0 for f in files)
        )

    def render(self) -> str:
        """Like ``git diff --stat``'s list: ``path | N +++--``."""
        width = max((len(f.path) for f in self.files), default=0)
        lines = [
            f" {f.path:<{width}} | {(f.added or 0) + (f.deleted or 0):>4} "
            f"{'+' * min(f.added or 0, 40)}{'-' * min(f.deleted or 0, 40)}"
            for f in self.files
        ]
        lines.append(
            f" {len(self.files)} files changed, {self.insertions} insertions(+), {self.deletions} deletions(-)"
        )
        return "\n".join(lines)


class ShowStat(BaseModel):
    commit: CommitInfo
    body: str
    stat: DiffStat


class RevertPlan(BaseModel):
    culprit: str
    base_sha: str
    revert_sha: str | None  # None when the revert conflicts
    conflict: bool
    conflicting_files: list[str] = []
    stat: DiffStat | None = None
    # Files whose revert conflicted and that were left as at base instead (only those the caller
    # named in ``keep``: files no run executes). Empty for a whole revert.
    kept: list[str] = []


def _iso_utc(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _parse_reflog_file(text: str, ref: str) -> list[ReflogEntry]:
    """Parse ``.git/logs/REF`` (``old new Name <email> epoch tz<TAB>message``), newest first."""
    entries = []
    for line in text.splitlines():
        head, _, message = line.partition("\t")
        parts = head.split(" ")
        if len(parts) < 5:
            continue
        old, new, epoch = parts[0], parts[1], int(parts[-2])
        name = " ".join(parts[2:-2])
        entries.append((old, new, name, epoch, message))
    out = []
    for i, (old, new, name, epoch, message) in enumerate(reversed(entries)):
        out.append(
            ReflogEntry(
                selector=f"{ref}@{{{i}}}",
                old_sha=old,
                new_sha=new,
                action=message,
                command=message.split(":")[0].split(" ")[0],
                time=_iso_utc(epoch),
                committer=name.split(" <")[0],
            )
        )
    return out


def _diff_lines(diff: str, sign: str) -> set[tuple[str, str]]:
    """(path, stripped line) of every line a unified diff adds (``sign`` "+") or deletes ("-").
    A file's ``---``/``+++`` header is read only before its first hunk (a deleted line that began
    with "--" is content); a deleted file's lines count under its old path."""
    out: set[tuple[str, str]] = set()
    path, header = "", False
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            path, header = "", True
        elif header and line.startswith("--- "):
            path = line[6:] if line.startswith("--- a/") else ""
        elif header and line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else path
        elif line.startswith("@@"):
            header = False
        elif not header and line.startswith(sign) and path and line[1:].strip():
            out.add((path, line[1:].strip()))
    return out


class RevertCommit(BaseModel):
    """A commit that reverts another: by its message ("This reverts commit SHA"), or by its lines
    (it deletes at least half of the lines the other added, with no such message: a silent undo,
    before a re-land)."""

    sha: str
    subject: str
    by: Literal["message", "lines"] = "message"


class GitRepo(Protocol):
    path: str

    def rev_parse(self, ref: str) -> str: ...
    def status(self) -> GitStatus: ...
    def log(self, rev_range: str, max_count: int | None = None, first_parent: bool = False) -> list[CommitInfo]: ...
    def reflog(self, ref: str = "HEAD", limit: int | None = None) -> list[ReflogEntry]: ...
    def diff_stat(self, a: str | None = "HEAD", b: str | None = None) -> DiffStat: ...
    def show_stat(self, ref: str) -> ShowStat: ...
    def merge_base(self, a: str, b: str) -> str: ...


class CliGit:
    """git over a Host (local or SSH): every argument is passed as argv, quoted by the Host."""

    def __init__(self, path: str | Path, host: Host | None = None, timeout: float = 120.0) -> None:
        self.path = str(path)
        self.host = host or LocalHost()
        self.timeout = timeout
        # Scratch worktrees this object made and has not yet removed: a signal landing while one
        # is removed cuts its ``finally`` short, and ``drop_own_worktrees`` finishes the job.
        self.scratch: set[str] = set()
        top = self.host.run(["git", "-C", self.path, "rev-parse", "--show-toplevel"], timeout=timeout)
        if not top.ok:
            raise GitError(f"{self.path} is not a git repository (on {self.host.name})")

    def close(self) -> None:
        """Nothing to end: every call is its own ``git`` process."""

    def git(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> RunResult:
        res = self.host.run(["git", "-C", self.path, *args], env=env, timeout=self.timeout)
        if check and not res.ok:
            msg = (res.stderr or res.stdout).strip().splitlines()
            raise GitError(f"git {' '.join(args)} in {self.path}: {msg[0] if msg else f'exit {res.exit_code}'}")
        return res

    def rev_parse(self, ref: str) -> str:
        res = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        if not res.ok or not res.stdout.strip():
            raise GitError(f"unknown ref '{ref}' in {self.path}")
        return res.stdout.strip()

    def tree_hash(self, ref: str) -> str:
        return self.git("rev-parse", f"{self.rev_parse(ref)}^{{tree}}").stdout.strip()

    def status(self) -> GitStatus:
        out = self.git("status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
        staged, unstaged, untracked = [], [], []
        items = out.split("\0")
        i = 0
        while i < len(items):
            item = items[i]
            i += 1
            if len(item) < 4:
                continue
            x, y, path = item[0], item[1], item[3:]
            if x in "RC":
                i += 1  # the rename source follows
            if x == "?":
                untracked.append(path)
                continue
            if x not in " ?":
                staged.append(path)
            if y not in " ?":
                unstaged.append(path)
        branch = self.git("symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip() or None
        return GitStatus(
            branch=branch,
            head_sha=self.rev_parse("HEAD"),
            staged=sorted(staged),
            unstaged=sorted(unstaged),
            untracked=sorted(untracked),
        )

    def log(self, rev_range: str, max_count: int | None = None, first_parent: bool = False) -> list[CommitInfo]:
        self._check_range(rev_range)
        args = ["log", "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%s%x1e"]
        if max_count:
            args.append(f"--max-count={max_count}")
        if first_parent:
            args.append("--first-parent")
        out = self.git(*args, "--end-of-options", rev_range).stdout
        commits = []
        for rec in out.split("\x1e"):
            rec = rec.strip("\n")
            if not rec:
                continue
            sha, parents, an, ae, date, subject = rec.split("\x1f")
            commits.append(
                CommitInfo(sha=sha, parents=parents.split(), author=an, author_email=ae, date=date, subject=subject)
            )
        return commits

    def _check_range(self, rev_range: str) -> None:
        for ref in rev_range.replace("...", "..").split(".."):
            if ref:
                self.rev_parse(ref)

    def reflog(self, ref: str = "HEAD", limit: int | None = None) -> list[ReflogEntry]:
        path = self.git("rev-parse", "--git-path", f"logs/{ref}").stdout.strip()
        res = self.host.run(["cat", path], cwd=self.path, timeout=self.timeout)
        entries = _parse_reflog_file(res.stdout, ref) if res.ok else []
        return entries[:limit] if limit else entries

    def diff_stat(self, a: str | None = "HEAD", b: str | None = None) -> DiffStat:
        refs = [r for r in (a, b) if r]
        for r in refs:
            self.rev_parse(r)
        out = self.git("diff", "--numstat", "--no-renames", *refs, "--").stdout
        return DiffStat.of([_numstat(line) for line in out.splitlines() if line.strip()])

    def show_stat(self, ref: str) -> ShowStat:
        sha = self.rev_parse(ref)
        (info,) = self.log(sha, max_count=1)
        body = self.git("log", "-1", "--format=%b", sha).stdout.strip()
        parents = info.parents[:1] or [self._empty_tree()]
        out = self.git("diff", "--numstat", "--no-renames", parents[0], sha, "--").stdout
        return ShowStat(commit=info, body=body, stat=DiffStat.of([_numstat(x) for x in out.splitlines() if x.strip()]))

    def _empty_tree(self) -> str:
        return self.git("hash-object", "-t", "tree", "/dev/null").stdout.strip()

    def merge_base(self, a: str, b: str) -> str:
        res = self.git("merge-base", self.rev_parse(a), self.rev_parse(b), check=False)
        if not res.ok:
            raise GitError(f"no merge base of '{a}' and '{b}' in {self.path}")
        return res.stdout.strip()

    def is_ancestor(self, a: str, b: str) -> bool:
        """Is ``a`` ``b`` or one of its ancestors? (``git merge-base --is-ancestor``)"""
        res = self.git("merge-base", "--is-ancestor", self.rev_parse(a), self.rev_parse(b), check=False)
        if res.exit_code not in (0, 1):
            raise GitError(f"git merge-base --is-ancestor {a} {b} in {self.path}: exit {res.exit_code}")
        return res.exit_code == 0

    def rev_list(self, good: str, bad: str, first_parent: bool = False) -> dict[str, list[str]]:
        """Commits in good..bad with their parents (the graph bisection works on), newest first."""
        args = ["rev-list", "--parents", "--topo-order"] + (["--first-parent"] if first_parent else [])
        out = self.git(*args, f"{self.rev_parse(good)}..{self.rev_parse(bad)}").stdout
        return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}

    def changed_paths(self, good: str, bad: str) -> dict[str, list[str]]:
        """The files each commit of good..bad changes (a merge: against its first parent), in one
        ``git log``; renames as a deletion and an addition (both paths count)."""
        out = self.git(
            "log",
            "--no-renames",
            "--name-only",
            "--diff-merges=first-parent",
            "--format=@@%H",
            f"{self.rev_parse(good)}..{self.rev_parse(bad)}",
        ).stdout
        paths: dict[str, list[str]] = {}
        sha = ""
        for line in out.splitlines():
            if line.startswith("@@"):
                sha = line[2:].strip()
                paths[sha] = []
            elif line.strip() and sha:
                paths[sha].append(line.strip())
        return paths

    def reverts_of(self, sha: str, head: str = "HEAD") -> list[RevertCommit]:
        """The commits of sha..head that revert ``sha``, newest first: those whose message says so
        (``git revert``'s "This reverts commit SHA.", the full SHA or an abbreviation), and those
        that delete at least half of the lines it added without saying so (``undone_by_lines``)."""
        full, tip = self.rev_parse(sha), self.rev_parse(head)
        said = self._reverts_by_message(full, tip)
        silent = [c for c in self.undone_by_lines(full, tip) if c.sha not in {r.sha for r in said}]
        if not silent:
            return said
        order = {s: i for i, s in enumerate(self.git("rev-list", f"{full}..{tip}").stdout.split())}
        return sorted(said + silent, key=lambda c: order.get(c.sha, -1))

    # A line of fewer characters than this (a brace, ``else:``, ``pass``) says nothing of whose it is.
    UNDO_LINE_MIN = 8

    def undone_by_lines(self, full: str, tip: str) -> list[RevertCommit]:
        """The commits of full..tip that delete at least half of the lines ``full`` added (each
        stripped, of ``UNDO_LINE_MIN`` characters or more, in the same files) and, where ``full``
        replaced lines, bring at least half of those back, oldest first: an undo whose message
        does not say so, which a re-land may follow (a README update that also took a slow change
        back out). A later edit of the same lines to something else is no undo: a toolz trial's
        hunt said "d06cfd7bb7 reverts it" of a commit that moved a workflow's pin on from the
        version 775434a252 had set, and labelled that state "reverted"."""
        shown = self.git("show", "--format=", "-U0", "--no-color", "--no-renames", full).stdout
        want = {x for x in _diff_lines(shown, "+") if len(x[1]) >= self.UNDO_LINE_MIN}
        replaced = {x for x in _diff_lines(shown, "-") if len(x[1]) >= self.UNDO_LINE_MIN} - want
        if not want:
            return []
        paths = sorted({path for path, _ in want})
        out = self.git(
            "log", "--reverse", "--format=%x1e%H%x00%s", "-p", "-U0", "--no-color", "--no-renames",
            f"{full}..{tip}", "--", *paths,
        ).stdout  # fmt: skip
        found = []
        for record in out.split("\x1e"):
            if not record.strip():
                continue
            head, _, diff = record.partition("\n")
            rev, _, subject = head.partition("\x00")
            minus, plus = _diff_lines(diff, "-"), _diff_lines(diff, "+")
            gone, back = minus - plus, plus - minus  # lines moved within it are neither
            if 2 * len(want & gone) >= len(want) and 2 * len(replaced & back) >= len(replaced):
                found.append(RevertCommit(sha=rev, subject=subject, by="lines"))
        return found

    def _reverts_by_message(self, full: str, tip: str) -> list[RevertCommit]:
        out = self.git(
            "log", "--format=%H%x00%s%x00%B%x1e", "-F", f"--grep=This reverts commit {full[:7]}", f"{full}..{tip}"
        ).stdout
        found = []
        for record in out.split("\x1e"):
            if not record.strip():
                continue
            rev, subject, body = record.strip("\n").split("\x00", 2)
            # The abbreviation matched; the SHA the message names must be this one, not another
            # commit sharing its first seven digits.
            named = re.findall(r"This reverts commit ([0-9a-f]{7,40})", body)
            if any(full.startswith(n) for n in named):
                found.append(RevertCommit(sha=rev, subject=subject))
        return found

    def worktree_file(self, path: str) -> str | None:
        """A file's text in the checkout as it is now (uncommitted edits included); None where
        there is no such file (deleted, or a folder)."""
        res = self.host.run(["cat", "--", path], cwd=self.path, timeout=self.timeout)
        return res.stdout if res.ok else None

    def file_at(self, ref: str, path: str) -> str | None:
        """A file's text at ``ref``; None where ``ref``'s tree has no such file."""
        res = self.git("show", f"{self.rev_parse(ref)}:{path}", check=False)
        return res.stdout if res.ok else None

    def pin_moves(self, good: str, bad: str) -> list[PinMove]:
        """The pinned versions that moved between ``good`` and ``bad`` in every requirement or
        lock file either tree has that a commit of the range touched (``tools.pins``)."""
        touched = {f for files in self.changed_paths(good, bad).values() for f in files if is_pin_file(f)}
        out: list[PinMove] = []
        for path in sorted(touched):
            out += moves(path, self.file_at(good, path), self.file_at(bad, path))
        return out

    def ls_files(self, ref: str) -> set[str]:
        """Every file path in ``ref``'s tree."""
        return set(self.git("ls-tree", "-r", "--name-only", self.rev_parse(ref)).stdout.splitlines())

    def grep_files(self, ref: str, pattern: str, pathspec: str = ".") -> set[str]:
        """The files of ``ref``'s tree whose text matches the extended regex ``pattern``."""
        sha = self.rev_parse(ref)
        res = self.git("grep", "-l", "-E", pattern, sha, "--", pathspec, check=False)
        if res.exit_code not in (0, 1):  # 1: no match
            raise GitError(f"git grep in {self.path}: {(res.stderr or res.stdout).strip()[:200]}")
        return {line.split(":", 1)[1] for line in res.stdout.splitlines() if ":" in line}

    # -- probes -----------------------------------------------------------------------------
    def snapshot(self, paths: list[str] | None = None) -> str:
        """A commit object holding the working tree as it is (tracked changes and untracked files,
        ignored ones excluded), parent HEAD; with ``paths``, HEAD plus the working-tree state of just
        those paths (to tell which uncommitted change matters). The user's index and files are not
        touched: everything goes through a temporary index."""
        head = self.rev_parse("HEAD")
        if paths is None and self.status().clean:
            return head
        index = self.git("rev-parse", "--git-path", "index").stdout.strip()
        tmp_index = f"/tmp/sleuth-index-{uuid.uuid4().hex}"
        try:
            env = {"GIT_INDEX_FILE": tmp_index}
            if paths is None:
                self.host.run(["cp", index, tmp_index], cwd=self.path, timeout=self.timeout).check()
                self.git("add", "-A", "--", ".", env=env)
            else:
                self.git("read-tree", head, env=env)
                if paths:
                    self.git("add", "-A", "--", *paths, env=env)
            tree = self.git("write-tree", env=env).stdout.strip()
        finally:
            self.host.run(["rm", "-f", tmp_index], timeout=self.timeout)
        what = "uncommitted work" if paths is None else f"uncommitted changes to {len(paths)} path(s)"
        # Dated like HEAD, so the same work always gives the same SHA (caches and replays match).
        when = self.git("log", "-1", "--format=%cI", head).stdout.strip()
        stamp = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        return self.git(
            *SLEUTH_IDENTITY, "commit-tree", tree, "-p", head, "-m", f"perf-sleuth snapshot of {what}", env=stamp
        ).stdout.strip()

    @contextlib.contextmanager
    def worktree(self, ref: str, where: str | None = None) -> Iterator[str]:
        """A scratch worktree at ``ref`` (detached), removed afterwards whatever happens."""
        sha = self.rev_parse(ref)
        # The owner's pid is in the name, so a later start can tell a worktree left by a killed
        # process (see ``remove_stale_worktrees``) from one in use.
        path = where or f"{WORKTREE_PREFIX}{os.getpid()}-{sha[:10]}-{uuid.uuid4().hex[:8]}"
        self.scratch.add(path)  # before the add: one interrupted mid-add leaves a worktree too
        try:
            self.git("worktree", "add", "--detach", "--quiet", path, sha)
            yield path
        finally:
            # On a host that stopped answering there is nothing to remove from here (and an error
            # raised while the worktree is dropped on the way out, or when the context is left to
            # the garbage collector, was a second traceback): the next start there removes it
            # (``remove_stale_worktrees``).
            with contextlib.suppress(HostError):
                self._drop_scratch(path)

    def _drop_scratch(self, path: str) -> None:
        self._drop_worktree(path)
        self.git("worktree", "prune", check=False)
        self.scratch.discard(path)

    def drop_own_worktrees(self) -> list[str]:
        """Remove the scratch worktrees this object made that are still there: their removal was
        cut short (a SIGTERM from a dying service landed in it, and CI's killed-service test found
        the worktree after the hunt had gone). Called on the way out, when none is in use."""
        left = sorted(self.scratch)
        for path in left:
            self._drop_scratch(path)
        return left

    def _drop_worktree(self, path: str) -> None:
        """Remove a scratch worktree and its files. ``--force`` twice: ``git worktree add`` locks the
        new worktree ("initializing") until it has checked out, so one interrupted there (SIGTERM
        mid-add) is locked, and a locked worktree survives ``remove --force`` and ``prune``."""
        self.git("worktree", "remove", "--force", "--force", path, check=False)
        self.host.run(["rm", "-rf", path], timeout=self.timeout)

    def remove_stale_worktrees(self) -> list[str]:
        """Remove scratch worktrees whose owning process is gone (it was killed mid-probe)."""
        out = self.git("worktree", "list", "--porcelain").stdout
        removed = []
        for line in out.splitlines():
            path = line.removeprefix("worktree ").strip()
            if not line.startswith("worktree ") or not path.startswith(WORKTREE_PREFIX):
                continue
            owner = path[len(WORKTREE_PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and self.host.run(["kill", "-0", owner], timeout=30).ok:
                continue  # its process is alive: in use
            self._drop_worktree(path)
            removed.append(path)
        if removed:
            self.git("worktree", "prune", check=False)
        return removed

    def prepare_revert(self, culprit: str, base: str = "HEAD", keep: list[str] | None = None) -> RevertPlan:
        """Revert ``culprit`` on top of ``base`` in a scratch worktree; returns the commit (no ref moved).

        ``keep``: files that may stay as at ``base`` where the revert conflicts (files no run
        executes: a CHANGELOG or a test a later commit also edited, as on any fork). When every
        conflicting file is among them, those stay as they are, the rest of the culprit is
        reverted, and the commit's message says which were kept (``RevertPlan.kept``)."""
        culprit_sha, base_sha = self.rev_parse(culprit), self.rev_parse(base)
        kept: list[str] = []
        with self.worktree(base_sha) as wt:
            res = self.host.run(
                ["git", "-C", wt, *SLEUTH_IDENTITY, "revert", "--no-edit", culprit_sha], timeout=self.timeout
            )
            if not res.ok:
                conflicts = sorted(
                    self.host.run(
                        ["git", "-C", wt, "diff", "--name-only", "--diff-filter=U"], timeout=self.timeout
                    ).stdout.split()
                )
                if not conflicts or not set(conflicts) <= set(keep or []) or not self._keep_at_base(wt, conflicts):
                    self.host.run(["git", "-C", wt, "revert", "--abort"], timeout=self.timeout)
                    return RevertPlan(
                        culprit=culprit_sha,
                        base_sha=base_sha,
                        revert_sha=None,
                        conflict=True,
                        conflicting_files=conflicts,
                    )
                kept = conflicts
            sha = self.host.run(["git", "-C", wt, "rev-parse", "HEAD"], timeout=self.timeout).check().stdout.strip()
        return RevertPlan(
            culprit=culprit_sha,
            base_sha=base_sha,
            revert_sha=sha,
            conflict=False,
            stat=self.diff_stat(base_sha, sha),
            kept=kept,
        )

    def _keep_at_base(self, wt: str, files: list[str]) -> bool:
        """Inside a conflicted revert in ``wt``: put ``files`` back as at the worktree's HEAD (or
        remove one HEAD does not have) and commit the revert, its message saying so. False when
        git refuses (then the caller aborts the revert)."""
        run = self.host.run
        for f in files:
            there = run(["git", "-C", wt, "cat-file", "-e", f"HEAD:{f}"], timeout=self.timeout).ok
            step = ["checkout", "HEAD", "--", f] if there else ["rm", "-q", "-f", "--", f]
            if not run(["git", "-C", wt, *step], timeout=self.timeout).ok:
                return False
        msg_path = run(["git", "-C", wt, "rev-parse", "--git-path", "MERGE_MSG"], timeout=self.timeout).stdout.strip()
        msg_file = msg_path if msg_path.startswith("/") else f"{wt}/{msg_path}"
        said = run(["cat", msg_file], timeout=self.timeout).stdout
        message = "\n".join(line for line in said.splitlines() if not line.startswith("#")).strip()
        message += (
            f"\n\nLeft as they were ({', '.join(files)}): the revert conflicts there, and no run of the "
            "workload executes them (perf-sleuth's code-path trace)."
        )
        return run(["git", "-C", wt, *SLEUTH_IDENTITY, "commit", "-q", "-m", message], timeout=self.timeout).ok

    def land_revert(self, plan: RevertPlan, branch: str | None = None) -> str:
        """MUTATE (after approval): create a branch at the prepared revert. Returns the branch name."""
        if plan.revert_sha is None:
            raise GitError(f"the revert of {plan.culprit[:10]} conflicts; nothing to land")
        name = branch or revert_branch(plan.culprit)
        there = self.git("rev-parse", "--verify", "--quiet", f"refs/heads/{name}^{{commit}}", check=False)
        if there.ok and there.stdout.strip() == plan.revert_sha:
            return name  # landed already (an approval killed after it landed, run again): nothing to do
        res = self.git("branch", "--end-of-options", name, plan.revert_sha, check=False)
        if not res.ok:
            raise GitError(f"cannot create branch '{name}' in {self.path}: {res.stderr.strip()}")
        return name


def revert_branch(*refs: str) -> str:
    """The branch an approved revert lands on by default: ``sleuth/revert-SHA10``, or for a chain
    of reverts every commit's, ``sleuth/revert-A10-B10``."""
    return "sleuth/revert-" + "-".join(r[:10] for r in refs)


def _numstat(line: str) -> FileStat:
    added, deleted, path = line.split("\t", 2)
    return FileStat(
        path=path, added=None if added == "-" else int(added), deleted=None if deleted == "-" else int(deleted)
    )


def _commit_info(c) -> CommitInfo:
    """A GitPython commit as the same model the CLI backend returns."""
    return CommitInfo(
        sha=c.hexsha,
        parents=[p.hexsha for p in c.parents],
        author=c.author.name or "",
        author_email=c.author.email or "",
        date=c.authored_datetime.isoformat(),
        subject=c.summary,
    )


class LocalGit(CliGit):
    """This machine's repositories through GitPython (the reads); probes share the CLI code path."""

    def __init__(self, path: str | Path) -> None:
        import git as gitpython

        try:
            self.repo = gitpython.Repo(path, search_parent_directories=False)
        except (gitpython.exc.InvalidGitRepositoryError, gitpython.exc.NoSuchPathError) as exc:
            top = LocalHost().run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], timeout=30)
            if top.ok and top.stdout.strip():  # a folder inside one: say which repository
                raise GitError(f"{path} is a folder inside the repository {top.stdout.strip()}: give that") from exc
            raise GitError(f"{path} is not a git repository") from exc
        super().__init__(path, LocalHost())

    def close(self) -> None:
        """End GitPython's persistent ``git cat-file`` processes (a long-lived caller, the service
        or a test process running hunts in-process, would otherwise keep two per repository)."""
        self.repo.close()

    def _commit(self, ref: str):
        import git as gitpython

        try:
            return self.repo.commit(ref)
        except (gitpython.exc.BadName, ValueError, gitpython.exc.GitCommandError) as exc:
            raise GitError(f"unknown ref '{ref}' in {self.path}") from exc

    def rev_parse(self, ref: str) -> str:
        if ref.startswith("-"):
            raise GitError(f"unknown ref '{ref}' in {self.path}")
        return self._commit(ref).hexsha

    def status(self) -> GitStatus:
        r = self.repo
        head = r.head.commit
        staged = sorted({d.a_path or d.b_path for d in r.index.diff(head)})
        unstaged = sorted({d.a_path or d.b_path for d in r.index.diff(None)})
        branch = None if r.head.is_detached else r.active_branch.name
        return GitStatus(
            branch=branch, head_sha=head.hexsha, staged=staged, unstaged=unstaged, untracked=sorted(r.untracked_files)
        )

    def log(self, rev_range: str, max_count: int | None = None, first_parent: bool = False) -> list[CommitInfo]:
        self._check_range(rev_range)
        kwargs: dict = {"first_parent": True} if first_parent else {}
        if max_count:
            kwargs["max_count"] = max_count
        return [_commit_info(c) for c in self.repo.iter_commits(rev_range, **kwargs)]

    def reflog(self, ref: str = "HEAD", limit: int | None = None) -> list[ReflogEntry]:
        ref_obj = self.repo.head if ref == "HEAD" else self.repo.refs[ref]
        try:
            raw = list(ref_obj.log())
        except FileNotFoundError:
            raw = []
        out = []
        for i, e in enumerate(reversed(raw)):
            out.append(
                ReflogEntry(
                    selector=f"{ref}@{{{i}}}",
                    old_sha=e.oldhexsha,
                    new_sha=e.newhexsha,
                    action=e.message,
                    command=e.message.split(":")[0].split(" ")[0],
                    time=_iso_utc(e.time[0]),
                    committer=e.actor.name or "",
                )
            )
        return out[:limit] if limit else out

    def show_stat(self, ref: str) -> ShowStat:
        c = self._commit(ref)
        files = [FileStat(path=p, added=s["insertions"], deleted=s["deletions"]) for p, s in c.stats.files.items()]
        info = _commit_info(c)
        message = c.message if isinstance(c.message, str) else c.message.decode()
        body = message.split("\n", 1)[1].strip() if "\n" in message else ""
        return ShowStat(commit=info, body=body, stat=DiffStat.of(files))

    def merge_base(self, a: str, b: str) -> str:
        bases = self.repo.merge_base(self._commit(a), self._commit(b))
        if not bases:
            raise GitError(f"no merge base of '{a}' and '{b}' in {self.path}")
        return bases[0].hexsha


def open_repo(path: str | Path, host: Host | None = None) -> CliGit:
    """GitPython for this machine, git over the Host for any other."""
    if host is None or isinstance(host, LocalHost):
        return LocalGit(path)
    return CliGit(path, host)
