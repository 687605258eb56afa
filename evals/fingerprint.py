"""Everything a user could lose in a checkout: every working-tree byte, the index, refs, stash, HEAD.
Equal before and after a run means the run left the user's repository as it found it; after an
approved revert, ``added_refs`` names the one thing that may differ. ``leftovers``: what a run
must not leave behind on the host (servers, scratch worktrees)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def fingerprint(repo: Path) -> dict:
    files = {}
    for p in sorted(repo.rglob("*")):
        if p.is_file() and ".git" not in p.relative_to(repo).parts:
            files[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    git = repo / ".git"
    refs = subprocess.run(["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True).stdout
    return {
        "files": files,
        "index": hashlib.sha256((git / "index").read_bytes()).hexdigest(),
        "refs": refs,
        "HEAD": (git / "HEAD").read_text(),
        "stash": (git / "refs" / "stash").exists(),
    }


def added_refs(before: dict, after: dict) -> list[str] | None:
    """The refs ``after`` has that ``before`` had not, when nothing else differs (every file, the
    index, HEAD, the stash, and every ref ``before`` had, where it was); None when anything did."""
    if {k: v for k, v in after.items() if k != "refs"} != {k: v for k, v in before.items() if k != "refs"}:
        return None
    old, new = set(before["refs"].splitlines()), set(after["refs"].splitlines())
    if not old <= new:
        return None
    return sorted(line.split("\t")[1] for line in new - old)


def leftovers(root: Path, repo: Path) -> tuple[list[str], list[str]]:
    """Server processes of the lab scenario at ``root`` still alive, and scratch worktrees still
    registered in ``repo``."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    servers = [p for p in ps if "minisglang.launch_server" in p and str(root) in p]
    trees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True).stdout
    return servers, [t for t in trees.splitlines() if "sleuth-wt" in t]
