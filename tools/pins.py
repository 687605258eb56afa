"""Versions a repository pins, and how its pins moved between two commits.

When a project's requirement or lock file changes between the known-good commit and HEAD, and the
environment followed it (the launch's Python has the new pin installed), that is a recorded
change of a package: evidence, where a commit's date is not. Read here: ``requirements*.txt`` and
``constraints*.txt`` (``name==version`` lines, extras, markers and hashes allowed), ``uv.lock``,
``poetry.lock`` and ``pylock.toml`` (their ``[[package]]`` tables), ``Pipfile.lock`` (its
``default`` section) and ``pyproject.toml`` (``[project] dependencies`` pinned with ``==``). A
range (``>=``) pins nothing: which version it gave is the snapshot's to say, not the file's.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import PurePosixPath

from pydantic import BaseModel

from tools.packages import norm

LOCK_NAMES = {"uv.lock", "poetry.lock", "pylock.toml", "Pipfile.lock", "pyproject.toml"}
REQUIREMENT_PREFIXES = ("requirements", "constraints")
_PINNED = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*([^\s;#,\\]+)")


class PinMove(BaseModel):
    """One package whose pinned version differs between two commits."""

    name: str  # PEP 503
    old: str | None  # None: not pinned at the first commit
    new: str | None  # None: no longer pinned
    file: str


def is_pin_file(path: str) -> bool:
    name = PurePosixPath(path).name
    if name in LOCK_NAMES:
        return True
    return name.startswith(REQUIREMENT_PREFIXES) and name.endswith((".txt", ".in"))


def pins_in(path: str, text: str) -> dict[str, str]:
    """``{name: version}`` pinned exactly in one file's text (names PEP 503); a file that does not
    parse pins nothing."""
    name = PurePosixPath(path).name
    try:
        if name == "Pipfile.lock":
            section = json.loads(text).get("default") or {}
            exact = {k: str(v.get("version", "")) for k, v in section.items()}
            return {norm(k): v.lstrip("=") for k, v in exact.items() if v.startswith("==")}
        if name == "pyproject.toml":
            deps = (tomllib.loads(text).get("project") or {}).get("dependencies") or []
            return _requirement_lines(deps)
        if name.endswith((".lock", ".toml")):
            packages = tomllib.loads(text).get("package") or []
            return {norm(p["name"]): str(p["version"]) for p in packages if p.get("name") and p.get("version")}
    except (ValueError, TypeError, KeyError, AttributeError):  # JSON and TOML errors are ValueErrors
        return {}
    return _requirement_lines(text.splitlines())


def _requirement_lines(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        if m := _PINNED.match(line):
            out[norm(m.group(1))] = m.group(2)
    return out


def moves(path: str, before: str | None, after: str | None) -> list[PinMove]:
    """The pins of one file that moved between two texts of it (None: the file did not exist)."""
    old, new = pins_in(path, before or ""), pins_in(path, after or "")
    return [
        PinMove(name=n, old=old.get(n), new=new.get(n), file=path)
        for n in sorted(old.keys() | new.keys())
        if old.get(n) != new.get(n)
    ]
