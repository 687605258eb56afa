"""Shared fixtures: the seed scenario built once per session, and small specs written on demand."""

from __future__ import annotations

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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` (pyproject): a module marked ``xdist_group`` runs on one worker, so its
    module fixture (a real hunt) is made once. pytest-xdist 3.8 tags a test's id with its group
    through ``item._nodeid``, which pytest 9.2 no longer reads (ids live in ``item._id``): without
    this the groups are silently ignored (pytest-xdist#1295). Does nothing once xdist tags them."""
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
    import os
    import shutil

    from tests.sshd import Sshd

    if shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"):
        if os.environ.get("SLEUTH_REQUIRE_SSHD"):
            pytest.fail("sshd is required (SLEUTH_REQUIRE_SSHD=1) but not installed")
        pytest.skip("OpenSSH server not installed (apt-get install openssh-server)")
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


@pytest.fixture
def tiny(tmp_path) -> tuple[Path, str]:
    """A project that is not a server: its benchmark is a command printing one number (a probe
    takes a fraction of a second). Commit 2 of 3 after the good one doubles the cost; returns
    (repo, good sha)."""
    repo = tmp_path / "tiny"
    repo.mkdir()
    git = git_in(repo)
    git("init", "-q")
    (repo / "bench.py").write_text(BENCH)
    (repo / "lib.py").write_text("COST = 1.0\n")
    git("add", ".")
    git("commit", "-qm", "init")
    good = git("rev-parse", "HEAD")
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
