"""Everything a user could lose in a checkout: every working-tree byte, the index, refs, stash, HEAD.
Equal before and after a run means the run left the user's repository as it found it; after an
approved revert, ``added_refs`` names the one thing that may differ. ``leftovers``: what a run
must not leave behind on the host (servers, scratch worktrees)."""

from __future__ import annotations

import hashlib
import os
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
    """What a run left on this machine for the lab scenario at ``root`` (whose checkout is
    ``repo``): processes still alive, and scratch worktrees still on disk.

    A lab server names neither path on its command line (``exec python -m ... --port N``): it
    carries the scenario in its environment (``env.sh`` exports paths under ``root``) and runs in
    a scratch worktree. So a process is the scenario's when its environment or its working
    directory mentions ``root``, or its working directory is a scratch worktree of ``repo``; a
    worktree is ``repo``'s when its ``.git`` file points into ``repo``'s git directory, whether
    or not ``repo`` (or ``root``) still exists."""
    under = [f"{root}/", f"{Path(root).resolve()}/"]
    trees = _scratch_worktrees(repo)
    servers = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or another user's
            continue
        cwd = cwd.removesuffix(" (deleted)")
        here = f"{cwd}/"
        if any(u in environ or here.startswith(u) for u in under) or any(here.startswith(t + "/") for t in trees):
            servers.append(f"{proc.name} {args}")
    return servers, trees


def _scratch_worktrees(repo: Path) -> list[str]:
    """The scratch worktrees (``tools.git.WORKTREE_PREFIX``) on disk that belong to ``repo``."""
    from tools.git import WORKTREE_PREFIX

    gitdir = str((Path(repo) / ".git").resolve())
    out = []
    for wt in sorted(Path(WORKTREE_PREFIX).parent.glob(Path(WORKTREE_PREFIX).name + "*")):
        try:
            pointer = (wt / ".git").read_text()
        except OSError:
            continue  # being made or removed right now (another run's, as like as ours)
        if f"{gitdir}/worktrees/" in pointer or f"{repo}/.git/worktrees/" in pointer:
            out.append(str(wt))
    return out
