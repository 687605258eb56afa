"""Which files a workload executes, and which commits therefore cannot have moved its metric.

A commit that touches no file the benchmark executes (and no build or dependency file) is not
the culprit, however the noise falls: bisection should neither probe nor blame it. On a real
range most commits are like that (docs, tests, models and backends the server never loads).

What "executed" means here is *imported*: Python prints every module it imports when
``PYTHONPROFILEIMPORTTIME`` is set, in every process of the workload (a server's scheduler
subprocesses inherit it), at the cost of a clock read per import and nothing on the hot path.
That is coarser than line coverage (a module imported but whose changed function never runs
still counts as executed) and so never prunes a commit that could matter; it needs no package in
the server's environment and no ``sitecustomize`` of ours shadowing the user's own.

Pruned besides: what CI, the code host or git's tooling reads (``.github/``, ``.gitignore``...).
Kept, whatever the trace says: build and dependency files, native sources (a kernel is executed
without an import line), any file the command names (its input), anything that is neither Python
nor documentation nor CI settings, a text file inside an
imported package (data it may read: a ``.txt`` there is not documentation), and Python files
that exist at neither traced end (nothing can be said about them).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from tools.files import write_json_atomic

TRACE_ENV = {"PYTHONPROFILEIMPORTTIME": "1"}
# A benchmark command's one traced run (not a sample, its output read for nothing else) also runs
# verbose: ``PYTHONPROFILEIMPORTTIME`` times only imports made by an import statement or
# ``__import__``, so a module loaded by ``importlib.import_module`` (plugins, model registries,
# kernel packages) prints no line of its own; the verbose ``import 'name' # loader`` line comes
# from the loader itself, whatever asked for the module. A server's log is not made verbose: its
# exit would end in a thousand cleanup lines after the traceback a failed launch is read by.
COMMAND_TRACE_ENV = {**TRACE_ENV, "PYTHONVERBOSE": "1"}
_LOADED_LINE = re.compile(r"^import '([\w.]+)' # ")
MAIN_GUARD = r"__name__ *== *.__main__."  # a file run as a script (git grep -E)
_IMPORT_LINE = re.compile(r"^import time:\s+\d+\s*\|\s*\d+\s*\|\s*(\S+)\s*$")

# Files a person writes for people, by name whatever their suffix ("NOTES.local", "README",
# "TODO.old"): a trial's hunt spent 386 of its 600 s proving an untracked NOTES.local did not slow it.
DOC_STEMS = {"README", "NOTES", "NOTE", "TODO", "CHANGES", "CHANGELOG", "HISTORY", "NEWS", "CONTRIBUTING",
             "AUTHORS", "LICENSE", "LICENCE", "NOTICE", "CODEOWNERS"}  # fmt: skip
DOC_SUFFIXES = {".md", ".rst", ".adoc", ".txt", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ipynb"}
BUILD_NAMES = {
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "MANIFEST.in",
    "CMakeLists.txt",
    "Makefile",
    "Dockerfile",
    "build.sh",
    "uv.lock",
    "poetry.lock",
    "Pipfile",
    "Pipfile.lock",
}
BUILD_PREFIXES = ("requirements", "constraints")  # requirements-gpu.txt, constraints.txt
# What a CI service, a code host or git's own tooling reads, and no program at run time: a commit
# touching only these is pruned like documentation (a toolz trial's hunt named a commit that
# changed one line of .github/workflows/publish_pypi.yml, and spent 320 samples refuting it).
# Not .gitattributes: its filters and line endings change what a checkout holds.
CI_DIRS = (".github/", ".gitlab/", ".circleci/", ".buildkite/", ".devcontainer/")
CI_NAMES = {
    ".gitlab-ci.yml",
    ".travis.yml",
    "appveyor.yml",
    ".appveyor.yml",
    "azure-pipelines.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".gitignore",
    ".mailmap",
    ".git-blame-ignore-revs",
    ".editorconfig",
    ".readthedocs.yml",
    ".readthedocs.yaml",
    "codecov.yml",
    ".codecov.yml",
    ".coveragerc",
}
NATIVE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".pyx", ".pxd", ".so", ".cmake"}


class CommitPath(BaseModel):
    """One commit of the range, judged against the traces of both ends."""

    sha: str
    files: list[str]
    pruned: bool
    reason: str  # why pruned ("touches only ... not imported at either end"), or why kept
    # The files that keep it (executed, named by the command, built, read at run time): the
    # others of a kept commit cannot change what runs either (a revert may leave them as they are).
    executed: list[str] = []


def imported_modules(text: str) -> set[str]:
    """The modules named by ``PYTHONPROFILEIMPORTTIME`` lines (and ``PYTHONVERBOSE``'s loader
    lines, where a traced command printed them) in a log or a command's stderr."""
    out = set()
    for line in text.splitlines():
        if m := _IMPORT_LINE.match(line.strip()) or _LOADED_LINE.match(line):
            out.add(m.group(1))
    return out


def entry_modules(command: str) -> tuple[set[str], set[str]]:
    """What a benchmark command runs or reads without importing it: ``python -m MOD`` (runpy
    executes it as ``__main__``), ``python path/to/script.py``, and every other relative file it
    names (``--prompts data/prompts.txt``, ``--config=conf/run.json``: its input, which no import
    line shows; a ``.txt`` there is not documentation). Returns (modules, file paths)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    modules = {words[i + 1] for i, w in enumerate(words[:-1]) if w == "-m"}
    files = set()
    for i, w in enumerate(words):
        value = w.split("=", 1)[1] if w.startswith("-") and "=" in w else w
        path = value.removeprefix("{worktree}/").removeprefix("./")
        if (i and words[i - 1] == "-m") or not path or path.startswith(("-", "/", "{", "$", "~")):
            continue
        name = PurePosixPath(path).name
        if "." in name.strip(".") and not re.fullmatch(r"[\d.]+", name):  # a file's name, not 0.5 or 10.0.0.1
            files.add(path)
    return modules, files


def _module_parts(path: str) -> tuple[str, ...]:
    p = PurePosixPath(path)
    parts = p.with_suffix("").parts
    return parts[:-1] if p.name == "__init__.py" else parts


def imported(path: str, modules: set[str]) -> bool:
    """Is the Python file ``path`` (repo-relative) a module in ``modules``? Matched by dotted
    suffix (``python/pkg/sub/mod.py`` is ``pkg.sub.mod``): where the repo puts its import root is
    not known, and a false match only keeps a commit that could have been pruned."""
    parts = _module_parts(path)
    return any(".".join(parts[i:]) in modules for i in range(len(parts)))


def _kind(path: str) -> str:
    p = PurePosixPath(path)
    name, suffix = p.name, p.suffix.lower()
    if path.startswith(CI_DIRS) or name in CI_NAMES:
        return "ci"
    if name in BUILD_NAMES or (name.startswith(BUILD_PREFIXES) and suffix in {".txt", ".in"}):
        return "build"
    if suffix in NATIVE_SUFFIXES:
        return "native"
    if suffix in DOC_SUFFIXES or (suffix != ".py" and name.split(".")[0].upper() in DOC_STEMS):
        return "docs"
    if suffix == ".py":
        return "python"
    return "other"


def _imported_package(path: str, modules: set[str]) -> str | None:
    """The imported package ``path`` lies in (any folder above it), or None. A ``.txt`` or
    ``.json`` beside a package's modules is data it may read (a tokenizer's character tables, a
    model's config), not documentation: sacremoses' 15x slowdown was a commit touching only
    ``sacremoses/data/*.txt``."""
    parents = PurePosixPath(path).parent.parts
    for n in range(len(parents), 0, -1):
        folder = "/".join(parents[:n])
        if imported(f"{folder}/__init__.py", modules):
            return folder
    return None


PRUNED_KINDS = {"ci": "CI and repository settings", "docs": "documentation", "python": "Python imported at neither end"}


def judge(sha: str, files: list[str], modules: set[str], scripts: set[str], present: set[str]) -> CommitPath:
    """Prune ``sha`` when every file it touches is documentation, CI or repository settings
    (``CI_DIRS``, ``CI_NAMES``), or Python that exists at a traced end and was imported at neither
    (``modules``: the union of both ends' imports)."""
    if not files:
        return CommitPath(sha=sha, files=[], pruned=True, reason="changes no file (an empty or merge-only commit)")
    why_kept = []
    executed = []
    for f in files:
        kind = _kind(f)
        why = None
        if kind != "python" and f in scripts:
            why = f"{f} is named by the command"
        elif kind == "python":
            if f in scripts or imported(f, modules):
                why = f"{f} is executed"
            elif f not in present:
                why = f"{f} exists at neither traced end"
        elif kind in ("build", "native"):
            why = f"{f} is a {kind} file"
        elif kind == "other":
            why = f"{f} may be read at run time"
        elif kind == "docs" and (pkg := _imported_package(f, modules)):
            why = f"{f} is data inside the imported package {pkg}"
        if why:
            why_kept.append(why)
            executed.append(f)
    if why_kept:
        return CommitPath(sha=sha, files=files, pruned=False, reason="; ".join(why_kept[:3]), executed=executed)
    kinds = sorted({_kind(f) for f in files})
    what = " and ".join(PRUNED_KINDS[k] for k in kinds)
    return CommitPath(sha=sha, files=files, pruned=True, reason=f"touches only {what} ({len(files)} file(s))")


def same_code(old: str, new: str) -> bool:
    """Do two texts of a Python file parse to the same syntax tree (so differ in comments,
    blank lines and formatting alone)? A docstring is code here: it is in the tree."""
    try:
        return ast.dump(ast.parse(old)) == ast.dump(ast.parse(new))
    except (SyntaxError, ValueError):
        return False


INERT_LIMIT = 50  # uncommitted paths looked at; more: none is said inert (a checkout mid-refactor)


def inert_changes(git, paths: list[str], limit: int = INERT_LIMIT) -> dict[str, str] | None:
    """Which uncommitted paths cannot change what runs, with why: a Python file whose text parses
    to the tree it had at HEAD (comments and formatting only), documentation in no package folder
    (no ``__init__.py`` above it: not data a package reads), CI and repository settings. Needs no
    trace: a toolz trial's hunt spent 320 samples and 145 of its 220 s proving that a comment and
    an untracked NOTES.txt did not slow it (``git``: a ``CliGit``). None past ``limit`` paths."""
    if len(paths) > limit:
        return None
    out: dict[str, str] = {}
    packages: set[str] | None = None  # the folders holding an __init__.py, read once (one call)
    for path in paths:
        kind = _kind(path)
        if kind == "ci":
            out[path] = PRUNED_KINDS["ci"]
        elif kind == "docs":
            if packages is None:
                packages = _package_folders(git, paths)
            if not any(folder in packages for folder in _folders(path)):
                out[path] = PRUNED_KINDS["docs"]
        elif kind == "python":  # two reads each, at most ``limit`` files: over SSH each is a round trip
            old, new = git.file_at("HEAD", path), git.worktree_file(path)
            if old is not None and new is not None and same_code(old, new):
                out[path] = "comments and formatting only"
    return out


def _folders(path: str) -> list[str]:
    parents = PurePosixPath(path).parent.parts
    return ["/".join(parents[:n]) for n in range(1, len(parents) + 1)]


def _package_folders(git, changed: list[str]) -> set[str]:
    """The folders of the checkout that hold an ``__init__.py``: HEAD's, and any among the changed
    (untracked) paths; a deleted one still counts (the change may be its deletion)."""
    found = set(git.git("ls-files", "--", "*__init__.py", "__init__.py").stdout.splitlines())
    found |= {p for p in changed if PurePosixPath(p).name == "__init__.py"}
    return {str(PurePosixPath(p).parent) for p in found}


class ImportTraces:
    """The modules imported at each traced commit, kept beside the run's measurements (a JSON
    file replaced atomically), so a resumed hunt still has the traces of launches before it."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self.data: dict[str, list[str]] = {}
        if self.path is not None and self.path.exists():
            try:
                self.data = json.loads(self.path.read_text())
            except ValueError:
                self.data = {}  # a torn file from a killed run: the traces are taken again

    def get(self, sha: str) -> set[str] | None:
        got = self.data.get(sha)
        return set(got) if got else None

    def add(self, sha: str, modules: set[str]) -> None:
        if not modules:
            return
        self.data[sha] = sorted(set(self.data.get(sha, [])) | modules)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, self.data)
