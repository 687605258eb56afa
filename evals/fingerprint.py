"""Everything a user could lose in a checkout: every working-tree byte, the index, refs, stash, HEAD.
Equal before and after a run means the run left the user's repository as it found it."""

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
