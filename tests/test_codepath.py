"""Code-path pruning: a commit that touches no file the workload executes is not bisected.

The unit part reads import traces and judges commits; the end-to-end part hunts a real
repository whose range holds docs commits, a commit to a module the benchmark never imports and
the culprit, and checks the first two kinds are listed as pruned and never probed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git_in, sleuth_in_process
from tools.codepath import ImportTraces, entry_modules, imported, imported_modules, judge
from transcripts.store import Store, layout

TRACE = """\
import time: self [us] | cumulative | imported package
import time:       196 |        196 |   _io
import time:       402 |        402 |   pkg.fast
import time:       633 |       2083 | pkg
Loading weights took 1.2 s
"""


def test_import_lines_are_read_from_a_log_among_other_lines():
    assert imported_modules(TRACE) == {"_io", "pkg.fast", "pkg"}


def test_the_trace_python_prints_is_what_it_reads():
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    res = subprocess.run(["python3", "-c", "import json"], env=env, capture_output=True, text=True, timeout=60)
    assert {"json", "json.decoder"} <= imported_modules(res.stderr)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("python/pkg/fast.py", True),  # the import root (python/) is not known: matched by suffix
        ("pkg/__init__.py", True),
        ("python/pkg/slow.py", False),
        ("docs/pkg.py", True),  # a false match only keeps a commit: never prunes one that matters
        ("fast.py", False),
    ],
)
def test_a_file_is_imported_when_its_dotted_path_ends_in_an_imported_module(path, expected):
    assert imported(path, {"pkg", "pkg.fast"}) is expected


def test_entry_points_of_a_command_are_executed_without_an_import_line():
    assert entry_modules("cd {worktree} && python3 -m pkg.bench --n 3 && python ./tools/run.py") == (
        {"pkg.bench"},
        {"tools/run.py"},
    )


def test_files_a_command_names_are_its_input_whatever_their_suffix():
    """A benchmark's prompts file is read, not imported: no trace shows it, and as a ``.txt``
    outside any imported package it read as documentation, so a commit that changed only the
    prompts was pruned and the step landed on a code commit beside it."""
    _, named = entry_modules("python bench.py --prompts data/prompts.txt --config=conf/run.json --rate 0.5 /etc/x.txt")
    assert named == {"bench.py", "data/prompts.txt", "conf/run.json"}
    got = judge("c0ffee", ["data/prompts.txt"], MODULES, named, PRESENT)
    assert not got.pruned and got.reason == "data/prompts.txt is named by the command"


MODULES = {"pkg", "pkg.fast"}
PRESENT = {"pkg/__init__.py", "pkg/fast.py", "pkg/slow.py", "bench.py", "README.md", "setup.py"}


@pytest.mark.parametrize(
    ("files", "pruned", "says"),
    [
        (["README.md", "docs/guide.rst"], True, "documentation"),
        (["pkg/slow.py"], True, "Python imported at neither end"),
        (["README.md", "pkg/slow.py"], True, "documentation and Python"),
        ([], True, "changes no file"),
        (["pkg/fast.py", "README.md"], False, "pkg/fast.py is executed"),
        (["bench.py"], False, "bench.py is executed"),  # run as a script
        (["setup.py"], False, "build file"),
        (["requirements-gpu.txt"], False, "build file"),
        (["csrc/attention.cu"], False, "native file"),
        (["pkg/config.yaml"], False, "may be read at run time"),
        (["pkg/gone.py"], False, "exists at neither traced end"),
        # Text beside an imported package's modules is data it may read (sacremoses' character
        # tables), not documentation; text in a folder no imported package holds still is.
        (["pkg/data/IsAlnum.txt"], False, "data inside the imported package pkg"),
        (["other/notes.txt", "docs/guide.md"], True, "documentation"),
        # What CI, the code host or git's tooling reads, no program at run time (a toolz trial's
        # hunt named a one-line .github/workflows change): pruned; .gitattributes changes checkouts
        ([".github/workflows/publish_pypi.yml"], True, "CI and repository settings"),
        ([".pre-commit-config.yaml", ".gitignore", "README.md"], True, "CI and repository settings and documentation"),
        ([".github/workflows/test.yml", "pkg/fast.py"], False, "pkg/fast.py is executed"),
        ([".gitattributes"], False, "may be read at run time"),
        (["pkg/.github.yml"], False, "may be read at run time"),
    ],
)
def test_a_commit_is_pruned_only_when_every_file_it_touches_cannot_matter(files, pruned, says):
    got = judge("c0ffee", files, MODULES, {"bench.py"}, PRESENT)
    assert got.pruned is pruned and says in got.reason


def test_traces_survive_a_new_process_and_a_torn_file(tmp_path):
    path = tmp_path / "imports.json"
    ImportTraces(path).add("abc", {"pkg"})
    ImportTraces(path).add("abc", {"pkg.fast"})
    assert ImportTraces(path).get("abc") == {"pkg", "pkg.fast"}
    assert ImportTraces(path).get("other") is None
    path.write_text('{"abc": ["pk')  # killed mid-write elsewhere: start over, do not fail
    assert ImportTraces(path).get("abc") is None


BENCH = "import random, pkg.fast as f; print(f.COST * random.gauss(1, 0.005))\n"


@pytest.fixture
def noisy_range(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """Ten commits after the good one: docs, tests, an unimported module, the culprit (pkg/fast.py),
    a build file, more docs. Returns (repo, good sha, {name: sha})."""
    repo = tmp_path / "proj"
    (repo / "pkg").mkdir(parents=True)
    git = git_in(repo)
    git("init", "-q")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "fast.py").write_text("COST = 1.0\n")
    (repo / "pkg" / "slow.py").write_text("def unused():\n    return 1\n")
    (repo / "bench.py").write_text(BENCH)
    (repo / "README.md").write_text("# proj\n")
    git("add", ".")
    git("commit", "-qm", "init")
    good = git("rev-parse", "HEAD")
    shas: dict[str, str] = {}
    steps = [
        ("docs1", "README.md", "# proj\nmore\n"),
        ("tests", "tests/test_x.py", "def test_x():\n    assert True\n"),
        ("slow", "pkg/slow.py", "def unused():\n    return 2\n"),
        ("docs2", "docs/guide.rst", "Guide\n=====\n"),
        ("culprit", "pkg/fast.py", "COST = 1.6\n"),
        ("build", "setup.py", "from setuptools import setup\nsetup()\n"),
        ("docs3", "README.md", "# proj\nmore\nand more\n"),
    ]
    for name, path, text in steps:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        git("add", path)
        git("commit", "-qm", name)
        shas[name] = git("rev-parse", "HEAD")
    return repo, good, shas


def test_a_hunt_prunes_commits_the_benchmark_never_executes(noisy_range, tmp_path):
    repo, good, shas = noisy_range
    db = tmp_path / "r.db"
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better", "--db", db, "--json"
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "commit" and v["root_cause"]["ref"] == shas["culprit"]
    pruned = {p["sha"]: p["reason"] for p in v["pruned"]}
    assert set(pruned) == {shas[n] for n in ("docs1", "tests", "slow", "docs2", "docs3")}
    assert "Python imported at neither end" in pruned[shas["slow"]]
    history = next(h for h in v["hypotheses"] if h["category"] == "history")
    assert "(5 pruned: no executed file)" in history["reason"]
    # None of them was probed (HEAD, docs3, is measured as the bad end): the culprit and the build
    # commit were the only candidates.
    measured = {m["ref"] for m in json.loads(_show(db, v["run_id"]))["measurements"]}
    assert measured & set(pruned) == {shas["docs3"]}
    report = (layout(db).runs / v["run_id"] / "report.md").read_text()
    assert "Commits not bisected: 5 (" in report and "Python imported at neither end" in report  # one line


def test_without_a_trace_nothing_is_pruned_and_the_hunt_says_why(noisy_range, tmp_path):
    repo, good, shas = noisy_range
    db = tmp_path / "r.db"
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--no-trace-paths", "--db", db, "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["ref"] == shas["culprit"] and v["pruned"] == []
    shown = json.loads(_show(db, v["run_id"]))
    assert any("no code-path pruning: tracing is off" in e["text"] for e in shown["events"])


def _show(db: Path, run_id: str) -> str:
    proc = sleuth_in_process("show", run_id, "--db", db, "--json")
    assert proc.returncode == 0, proc.stdout[-500:]
    return proc.stdout


CHILD_BENCH = """
import subprocess, sys
child = "import sys; sys.path.insert(0, '.'); " + {bench!r}
proc = subprocess.run([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr={stderr}, text=True, check=True)
print(proc.stdout.strip())
"""


@pytest.mark.parametrize(
    ("stderr", "prunes"),
    [("subprocess.PIPE", False), ("None", True)],
    ids=["child-stderr-kept", "child-stderr-passed-on"],
)
def test_work_in_a_child_interpreter_is_traced_through_its_stderr_or_nothing_is_pruned(
    noisy_range, tmp_path, stderr, prunes
):
    """The trace is what every Python process of the benchmark prints on stderr. A benchmark that
    keeps its child's stderr to itself shows imports, but none of the repository's: then "imported
    at neither end" would be said of the very files that run, so nothing is pruned, and it says so."""
    repo, good, shas = noisy_range
    script = tmp_path / "bench_child.py"
    script.write_text(CHILD_BENCH.format(bench=BENCH, stderr=stderr))
    db = tmp_path / "r.db"
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", f"python3 {script}", "--lower-is-better",
        "--db", db, "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    v = json.loads(proc.stdout)
    assert v["root_cause"]["ref"] == shas["culprit"]
    pruned = {p["sha"] for p in v["pruned"]}
    if prunes:
        assert pruned == {shas[n] for n in ("docs1", "tests", "slow", "docs2", "docs3")}
    else:
        assert pruned == set()
        shown = json.loads(_show(db, v["run_id"]))
        assert any("none of the repository's own" in e["text"] for e in shown["events"])


def test_an_uncommitted_change_that_cannot_alter_what_runs_is_said_inert(tmp_path):
    """Comments and formatting of a Python file, documentation in no package folder, CI settings:
    inert. A docstring (it is code), a Python file HEAD lacks, text beside a package's modules
    (data it may read) and a real edit are not."""
    from tests.conftest import bench_repo
    from tools.codepath import inert_changes
    from tools.git import CliGit

    repo, git, _good = bench_repo(tmp_path / "p", files={"lib.py": '"""Lib."""\nCOST = 1.0\n'})
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "mod.py").write_text("X = 1\n")
    git("add", "pkg")
    git("commit", "-qm", "a package")
    (repo / "lib.py").write_text('"""Lib."""\n# why the cost is what it is\nCOST = 1.0  # per item\n')
    (repo / "NOTES.txt").write_text("what I tried\n")
    (repo / "NOTES.local").write_text("the on-call's own notes\n")  # a notes file by its name, any suffix
    (repo / "config.local").write_text("threads = 8\n")  # a name that says nothing: it may be read
    (repo / ".github").mkdir()
    (repo / ".github" / "ci.yml").write_text("on: push\n")
    (repo / "pkg" / "table.txt").write_text("a b c\n")  # beside a package's modules: data
    (repo / "pkg" / "mod.py").write_text('"""Now documented."""\nX = 1\n')  # a docstring is code
    (repo / "new.py").write_text("# nothing yet\n")
    (repo / "bench.py").write_text((repo / "bench.py").read_text() + "\nCOST_SCALE = 2\n")
    paths = ["NOTES.txt", "NOTES.local", "config.local", ".github/ci.yml", "bench.py", "lib.py", "new.py",
             "pkg/mod.py", "pkg/table.txt"]  # fmt: skip
    assert inert_changes(CliGit(repo), paths) == {
        "lib.py": "comments and formatting only",
        "NOTES.txt": "documentation",
        "NOTES.local": "documentation",
        ".github/ci.yml": "CI and repository settings",
    }
    assert inert_changes(CliGit(repo), paths, limit=8) is None  # a checkout mid-refactor: not looked at


def test_a_hunt_suspects_no_uncommitted_change_that_cannot_alter_what_runs(tmp_path):
    """A comment in an executed module and an untracked NOTES.txt: no uncommitted hypothesis, no
    A/B for them (a toolz trial's hunt spent 320 samples and 145 of its 220 s on one), and the
    plan says which paths were left out and why. The slow commit is still named."""
    from tests.conftest import hunt_bench, one_slow_commit

    repo, good, slow = one_slow_commit(tmp_path / "p", 6, 4)
    (repo / "lib.py").write_text((repo / "lib.py").read_text() + "# measured on a quiet machine\n")
    (repo / "NOTES.txt").write_text("what I tried\n")
    db = tmp_path / "r.db"
    v = hunt_bench(repo, good, db)
    assert v["root_cause"]["ref"] == slow
    assert not [h for h in v["hypotheses"] if h["category"] == "uncommitted"]
    (run,) = [r["id"] for r in Store(db).runs()]
    said = [e["text"] for e in Store(db).events(run) if e["text"].startswith("uncommitted: ")]
    assert said == [
        "uncommitted: 2 path(s) whose change cannot alter what runs: NOTES.txt (documentation); "
        "lib.py (comments and formatting only)"
    ]


def test_a_known_good_ref_that_is_head_itself_states_no_history_hypothesis(tmp_path):
    """`--good HEAD` with a slow uncommitted edit: no commit lies between the two, so "a commit
    since HEAD slows it" is a suspect with no change behind it (a trial's hunt stated it and A/B'd
    HEAD against itself). The plan says why it is left out, and the edit is named."""
    from tests.conftest import bench_repo, hunt_bench

    repo, git, _good = bench_repo(tmp_path / "p")
    (repo / "lib.py").write_text("COST = 2.0\n")
    db = tmp_path / "r.db"
    v = hunt_bench(repo, "HEAD", db)
    assert [h["category"] for h in v["hypotheses"] if h["category"] == "history"] == []
    assert v["root_cause"]["kind"] == "uncommitted" and v["root_cause"]["ref"] == "lib.py", v["root_cause"]
    (run,) = [r["id"] for r in Store(db).runs()]
    head = git("rev-parse", "HEAD")
    said = [e["text"] for e in Store(db).events(run) if e["text"].startswith("no history hypothesis")]
    assert said == [f"no history hypothesis: the known-good ref given is HEAD itself ({head[:10]})"], said


def test_a_range_whose_every_commit_touches_no_executed_file_names_no_commit(tmp_path):
    """A trial's hunt: one README-only commit since the good one, a noisy A/B of the ends that
    read "different", and then "bisecting 0 of 1 commits" named that commit, "likely". A range of
    pruned commits is no suspect: history is refuted, and the drop is said to lie outside the repo.
    (Here the benchmark does read the README, so that the ends really differ, as the noise made
    them differ: the pruning is what is trusted.)"""
    from tests.conftest import bench_repo

    bench = "import pathlib\nimport lib\nprint(lib.COST * len(pathlib.Path('README.md').read_text()) / 2000)\n"
    repo, git, good = bench_repo(tmp_path / "proj", bench, {"lib.py": "COST = 1.0\n", "README.md": "x" * 40 + "\n"})
    (repo / "README.md").write_text("x" * 200 + "\n")
    git("commit", "-qam", "docs: explain bench output")
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--good-value", "0.02", "--bench", "python3 bench.py",
        "--lower-is-better", "--db", tmp_path / "r.db", "--json",
    )  # fmt: skip
    v = json.loads(proc.stdout)
    assert v["root_cause"]["kind"] == "external", v["summary"]
    history = next(h for h in v["hypotheses"] if h["category"] == "history")
    assert history["status"] == "refuted" and "touches a file the workload executes" in history["reason"]
    assert not v["culprits"]
