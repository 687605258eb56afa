"""Shared fixtures: the seed scenario built once per session, and small specs written on demand."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from evals.lab.builder import BuildResult, build
from evals.lab.demo import SEED_SPEC
from evals.lab.spec import load_spec

# Lab launches in the tests take a few percent of their simulated time (a realistic launch costs
# about ten samples; bench/real_cost.py runs them at full length). Subprocesses inherit it.
os.environ.setdefault("SLEUTH_LAB_LAUNCH_SCALE", "0.02")


def _python3_without_a_shim() -> None:
    """Put the interpreter that ``python3`` on PATH runs first on PATH itself, when ``python3`` is
    a version manager's shim (pyenv's is a bash script of about twenty processes: 0.08 s of CPU
    and of wall on every start here, and the tests start about 1,500 Pythons that way: lab
    servers, benchmarks, the lab's ``nvidia-smi``). The same interpreter runs, only sooner. Done
    once by the first process (the workers inherit PATH); does nothing where ``python3`` is the
    interpreter itself."""
    import shutil
    import tempfile

    found = shutil.which("python3")
    if not found or os.environ.get("SLEUTH_TEST_PYTHON3"):
        return
    real = subprocess.run(
        [found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, timeout=60
    )
    exe = real.stdout.strip()
    if real.returncode or not exe or os.path.realpath(exe) == os.path.realpath(found):
        return
    folder = Path(tempfile.gettempdir()) / f"sleuth-test-python3-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    link, tmp = folder / "python3", folder / f".python3.{os.getpid()}"
    if not link.exists() or os.path.realpath(link) != os.path.realpath(exe):
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(exe)
        tmp.replace(link)  # atomic: a run beside this one sees the old link or the new
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["SLEUTH_TEST_PYTHON3"] = exe


_python3_without_a_shim()

MINIMAL_SPEC = """
name = "tiny"
seed = 7
[history]
filler = 2
[[pulled]]
id = "slow"
subject = "Fence the eager all-reduce"
edits = [{ path = "python/minisglang/distributed/pynccl.py", effect = { cost = "allreduce_eager", add_us = 50 } }]
[[pulled]]
subject = "Docs"
edits = [{ path = "docs/notes.py", lines = 8 }]
[alert]
good = 94
bad = 70
max_tokens = 32
[truth]
culprits = ["slow"]
"""


# The default run's longest tests (20-65 s each on two cores, 2026-12-06), longest first. Four
# workers take tests in collection order as they free up, so these start first: in file order the
# approval page and the killed services came last and ran alone on one worker for the last 30-45 s
# of the run. The order changes when a test runs, never what it checks.
LONGEST_FIRST = (
    "tests/test_agent.py::test_demo_tells_the_seed_story_and_waits_for_approval",
    "tests/test_serve.py::test_an_alert_ends_with_a_person_approving_on_the_page_and_the_recovery_shown",
    "tests/test_serve_faults.py::test_a_hunt_left_running_is_adopted_by_the_next_service_never_driven_twice",
    "tests/test_serve_faults.py::test_a_service_killed_mid_hunt_takes_its_hunt_with_it_and_the_next_one_resumes_the_run",
    "tests/test_eval.py::test_a_suite_runs_scores_rescores_and_compares",
    "tests/test_dependencies.py::test_with_no_pip_log_and_no_wheelhouse_dist_info_times_name_it",
    "tests/test_realworld.py::test_sleuth_eval_names_the_real_culprit_offline",
    "tests/test_lease.py::test_two_approvals_at_once_land_one_revert",
    "tests/test_lease.py::test_a_second_driver_of_a_running_hunt_is_told_who_drives_it_and_changes_nothing",
    "tests/test_serve_faults.py::test_a_service_killed_as_an_alert_arrives_loses_nothing_once_the_alert_is_sent_again",
    "tests/test_cli_start.py::test_the_hunt_loads_what_it_needs_and_help_lists_every_command",
)


def _rank(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` (pyproject): a module marked ``xdist_group`` runs on one worker, so its
    module fixture (a real hunt) is made once. pytest-xdist 3.8 tags a test's id with its group
    through ``item._nodeid``, which pytest 9.2 no longer reads (ids live in ``item._id``): without
    this the groups are silently ignored (pytest-xdist#1295). Does nothing once xdist tags them.
    First, the longest tests go to the front (``LONGEST_FIRST``), the rest keep their order."""
    items.sort(key=_rank)
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
        if groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(scope="session")
def seed_scenario(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build(load_spec(SEED_SPEC), tmp_path_factory.mktemp("seed") / "scenario")


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a spec file (TOML text, dedented) and return its path."""

    def _write(text: str, name: str = "spec.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return _write


def sleuth_exe() -> str:
    """The ``sleuth`` console script of the interpreter running the tests (venv not activated is fine)."""
    import shutil
    import sys

    beside = Path(sys.executable).parent / "sleuth"
    return str(beside) if beside.exists() else (shutil.which("sleuth") or "sleuth")


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    """A real OpenSSH server on 127.0.0.1 (skipped only where sshd is absent and CI did not ask for it)."""
    from tests.sshd import Sshd, require_sshd

    require_sshd()
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture
def ssh_host(sshd):
    from tools.ssh import SSHHost

    host = SSHHost(
        "127.0.0.1",
        port=sshd.port,
        user="root",
        key_filename=sshd.client_key,
        known_hosts=sshd.known_hosts,
        ssh_config="/dev/null",
        allow_agent=False,
    )
    yield host
    host.close()


def sleuth_in_process(*args: str):
    """Run ``sleuth ARGS`` in this process (Typer's CliRunner): the same commands, exit codes and
    streams as the console script, without ~2 s of interpreter start per call."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from agent.cli import app, register

    register()
    r = CliRunner().invoke(app, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


BENCH = "import random, lib; print(lib.COST * random.gauss(1, 0.005))\n"


def git_in(repo: Path):
    """``git(*args) -> stdout`` in ``repo`` with a test identity (raises on a failing command)."""
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *ident, *args], check=True, capture_output=True, text=True, timeout=60
        ).stdout.strip()

    return git


def bench_repo(repo: Path, bench: str = BENCH, files: dict[str, str] | None = None):
    """A project whose benchmark is a command (``bench.py`` printing one number), its first
    commit holding ``bench.py`` and ``files`` (default ``lib.py`` with ``COST = 1.0``); returns
    (repo, its ``git``, the first commit's sha)."""
    repo.mkdir(parents=True)
    git = git_in(repo)
    git("init", "-q")
    (repo / "bench.py").write_text(bench)
    for name, text in (files or {"lib.py": "COST = 1.0\n"}).items():
        (repo / name).write_text(text)
    git("add", ".")
    git("commit", "-qm", "init")
    return repo, git, git("rev-parse", "HEAD")


def one_slow_commit(repo: Path, commits: int, slow: int, bench: str = BENCH) -> tuple[Path, str, str]:
    """``bench_repo`` and ``commits`` commits after it: the ``slow``-th (from 1) doubles the cost,
    each other one adds its own notes file (so the slow one reverts cleanly at HEAD); returns
    (repo, the good commit, the slow commit)."""
    repo, git, good = bench_repo(repo, bench)
    for i in range(1, commits + 1):
        name, text = ("lib.py", "COST = 2.0\n") if i == slow else (f"notes{i}.txt", f"{i}\n")
        (repo / name).write_text(text)
        git("add", name)
        git("commit", "-qm", f"change {i}")
    return repo, good, git("rev-list", "--reverse", f"{good}..HEAD").split()[slow - 1]


def hunt_bench(repo: Path, good: str, db: Path, *extra: str) -> dict:
    """``sleuth hunt --bench 'python3 bench.py' --lower-is-better`` from ``good``, in this
    process; the verdict."""
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better",
        "--db", db, "--json", *extra,
    )  # fmt: skip
    return json.loads(proc.stdout)


@pytest.fixture
def tiny(tmp_path) -> tuple[Path, str]:
    """A project that is not a server: its benchmark is a command printing one number (a probe
    takes a fraction of a second). Commit 2 of 3 after the good one doubles the cost; returns
    (repo, good sha)."""
    repo, git, good = bench_repo(tmp_path / "tiny")
    for i, cost in enumerate(("1.0", "2.0", "2.0"), 1):
        (repo / "lib.py").write_text(f"COST = {cost}\n# {i}\n")
        git("commit", "-qam", f"change {i}")
    return repo, good


def wait_for(cond, timeout: float, what: str):
    """Poll ``cond`` until it returns something truthy (returned) or ``timeout`` seconds pass
    (AssertionError naming ``what``): every wait in a test is bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
