"""A package is a suspect only where something recorded its change since the last good
measurement here, and only if the workload loads it. A commit's date is no evidence: bisecting
old history, every package of the environment is newer than the good commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import bench_repo, hunt_bench, sleuth_in_process
from tools.codepath import COMMAND_TRACE_ENV, imported_modules
from tools.packages import workload_dists
from tools.pins import moves, pins_in

REQS_OLD = "# pinned\nfastpkg==1.0 ; python_version >= '3.8'\nslowpkg[extra]==2.0 \\\n  --hash=sha256:abc\nrange>=1\n"
REQS_NEW = "# pinned\nfastpkg==1.0 ; python_version >= '3.8'\nslowpkg[extra]==2.1 \\\n  --hash=sha256:abc\nrange>=2\n"


def test_requirement_pins_are_read_with_extras_markers_and_hashes_and_a_range_pins_nothing():
    assert pins_in("requirements.txt", REQS_OLD) == {"fastpkg": "1.0", "slowpkg": "2.0"}
    assert [(m.name, m.old, m.new) for m in moves("requirements.txt", REQS_OLD, REQS_NEW)] == [
        ("slowpkg", "2.0", "2.1")
    ]


def test_lock_files_and_pyproject_pins_are_read():
    uv = '[[package]]\nname = "Jinja2"\nversion = "3.1.4"\n\n[[package]]\nname = "markupsafe"\nversion = "2.1.5"\n'
    assert pins_in("uv.lock", uv) == {"jinja2": "3.1.4", "markupsafe": "2.1.5"}
    pipfile = json.dumps({"default": {"Tokenizers": {"version": "==0.19.1"}, "x": {"version": "*"}}})
    assert pins_in("Pipfile.lock", pipfile) == {"tokenizers": "0.19.1"}
    pyproject = '[project]\nname = "p"\ndependencies = ["numpy==1.26.4", "scipy>=1.11"]\n'
    assert pins_in("pyproject.toml", pyproject) == {"numpy": "1.26.4"}
    assert pins_in("uv.lock", "not = [toml") == {}  # a file that does not parse pins nothing
    # A pin that appears or disappears moves too (from or to nothing).
    assert [(m.old, m.new) for m in moves("requirements.txt", None, "a==1\n")] == [(None, "1")]


def test_the_packages_a_workload_runs_are_those_it_loaded_and_what_they_require():
    provides = {"torch": ["torch"], "nvidia-nccl-cu12": ["nvidia"], "fastapi": ["fastapi"], "Flash_Infer": []}
    requires = {"torch": ["nvidia-nccl-cu12"], "fastapi": ["starlette"]}
    # NCCL's wheel is never imported by name: torch requires it. A dist whose files name no module
    # is taken at its name (flash_infer).
    assert workload_dists({"torch.nn", "flash_infer.ops", "json"}, provides, requires) == {
        "torch",
        "nvidia-nccl-cu12",
        "flash-infer",
    }


def test_a_traced_command_sees_what_importlib_loads_not_only_import_statements(tmp_path):
    (tmp_path / "plugin_by_name.py").write_text("X = 1\n")
    code = "import importlib, sys; sys.path.insert(0, '.'); importlib.import_module('plugin_by_name')"
    env = {**os.environ, **COMMAND_TRACE_ENV}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "plugin_by_name" in imported_modules(res.stderr)
    timed_only = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert "plugin_by_name" not in imported_modules(timed_only.stderr)  # why the verbose run is needed


def _site(where: Path, pkgs: dict[str, str]) -> Path:
    """A site directory with ``pkgs`` installed (name -> version), as pip leaves them, a day ago
    (before the repository's commits: the dist-info times are no evidence here)."""
    for name, version in pkgs.items():
        (where / name).mkdir(parents=True)
        (where / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
        info = where / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n")
        for f in info.iterdir():
            os.utime(f, (time.time() - 86400,) * 2)
    return where


def _pinned_repo(tmp_path: Path) -> tuple[Path, str]:
    """A benchmark-command project whose requirements.txt moved two pins after the good commit
    (both followed by the environment); its benchmark loads one of them, and a commit doubles
    its cost."""
    repo, git, good = bench_repo(
        tmp_path / "proj",
        "import importlib, random, lib\nimportlib.import_module('usedpkg')\nprint(lib.COST * random.gauss(1, 0.005))\n",
        {"lib.py": "COST = 1.0\n", "requirements.txt": "usedpkg==1.0\nidlepkg==1.0\n"},
    )
    (repo / "requirements.txt").write_text("usedpkg==2.0\nidlepkg==2.0\n")
    git("commit", "-qam", "bump pins")
    (repo / "lib.py").write_text("COST = 2.0\n")
    git("commit", "-qam", "slower")
    return repo, good


def _hunt(repo: Path, good: str, db: Path) -> dict:
    return hunt_bench(repo, good, db, "--samples", "4")


def _notes(run_id: str, db: Path) -> list[str]:
    shown = json.loads(sleuth_in_process("show", run_id, "--db", db, "--json").stdout)
    return [e["text"] for e in shown["events"] if e["kind"] == "note"]


def test_a_pin_the_environment_followed_is_evidence_only_for_a_package_the_workload_loads(tmp_path, monkeypatch):
    repo, good = _pinned_repo(tmp_path)
    site = _site(tmp_path / "site", {"usedpkg": "2.0", "idlepkg": "2.0"})
    monkeypatch.setenv("PYTHONPATH", str(site))
    db = tmp_path / "r.db"
    v = _hunt(repo, good, db)
    deps = [h for h in v["hypotheses"] if h["category"] == "dependencies"]
    assert [h["statement"] for h in deps] == [
        f"usedpkg 1.0 -> 2.0 on the host (per the pins in requirements.txt between {good[:10]} and HEAD) slows it"
    ], [h["statement"] for h in v["hypotheses"]]
    assert any(
        "1 changed package(s) the workload does not import left out: idlepkg" in t for t in _notes(v["run_id"], db)
    )
    assert v["root_cause"]["kind"] == "commit"


def test_a_pin_the_environment_did_not_follow_is_said_and_not_suspected(tmp_path, monkeypatch):
    repo, good = _pinned_repo(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(_site(tmp_path / "site", {"usedpkg": "1.5"})))
    db = tmp_path / "r.db"
    v = _hunt(repo, good, db)
    assert not [h for h in v["hypotheses"] if h["category"] == "dependencies"]
    said = _notes(v["run_id"], db)
    assert any(
        "pins moved that the environment does not follow: idlepkg 1.0 -> 2.0 (installed: none)" in t for t in said
    )


def _hunt_a_fresh_clone_of_2021(
    tmp_path, monkeypatch, before: dict[str, str], after: dict[str, str]
) -> tuple[dict, list[str]]:
    """Two commits of 2021, the good one holding ``before`` (and ``COST = 1.0``), the next one
    doubling the cost and writing ``after``, cloned today at HEAD and hunted: the verdict and the
    hunt's "dependencies:" lines."""
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2021-03-01T12:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2021-03-01T12:00:00Z")
    upstream, git, good = bench_repo(tmp_path / "upstream", files={"lib.py": "COST = 1.0\n", **before})
    for name, text in {"lib.py": "COST = 2.0\n", **after}.items():
        (upstream / name).write_text(text)
    git("commit", "-qam", "slower")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True, timeout=60)
    db = tmp_path / "r.db"
    v = _hunt(clone, good, db)
    return v, [t for t in _notes(v["run_id"], db) if t.startswith("dependencies:")]


def test_a_fresh_clone_bisecting_old_history_states_no_package_hypothesis(tmp_path, monkeypatch):
    """Commits of 2021, cloned today at HEAD: every package of this environment was installed
    after the good commit's date (the old fallback named each one). The reflog never had HEAD at
    it, there is no pip log and no earlier hunt: no evidence, said in one line."""
    v, said = _hunt_a_fresh_clone_of_2021(tmp_path, monkeypatch, {}, {})
    assert v["root_cause"]["kind"] == "commit"
    assert not [h for h in v["hypotheses"] if h["category"] == "dependencies"]
    assert len(said) == 1 and "no evidence of a package change" in said[0] and "no hypothesis" in said[0], said


def test_a_moved_pin_the_environment_did_not_follow_is_not_then_said_never_to_have_moved(tmp_path, monkeypatch):
    """A fresh clone whose requirements.txt moved a pin the environment does not have: the search
    says so, and its last line no longer adds "no pin moved between the good commit and HEAD"."""
    before, after = {"requirements.txt": "usedpkg==1.0\n"}, {"requirements.txt": "usedpkg==2.0\n"}
    _v, said = _hunt_a_fresh_clone_of_2021(tmp_path, monkeypatch, before, after)
    assert "pins moved that the environment does not follow: usedpkg 1.0 -> 2.0" in said[0], said
    assert "no moved pin the environment followed" in said[-1] and "no pin moved" not in said[-1], said


def test_the_package_snapshot_reads_the_python_the_launch_runs(tmp_path):
    """mlx-lm launched as `PYTHONPATH={worktree} exec ~/venv/bin/python -m mlx_lm.server`: the
    snapshot ran the host's python3, which had neither mlx nor transformers, and the hunt said "no
    evidence of a package change". It runs the interpreter the launch's last command names (a
    setup part's venv, or python3, where it names none)."""
    from agent.experiments import launch_python, setup_prefix
    from agent.state import Hunt, Target
    from tools.packages import snapshot_command

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "onlyhere-1.0.dist-info").mkdir()
    (site / "onlyhere-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: onlyhere\nVersion: 1.0\n")

    def hunt(launch: str) -> Hunt:
        return Hunt(run_id="r", target=Target(repo=str(tmp_path), launch=launch))

    served = hunt(f"cd {{worktree}} && PYTHONPATH={{worktree}} exec {venv}/bin/python -m srv --port {{port}}")
    assert launch_python(served) == f"{venv}/bin/python"
    out = subprocess.run(
        snapshot_command(setup_prefix(served), launch_python(served)), shell=True, capture_output=True, text=True,
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["dists"]["onlyhere"]["version"] == "1.0"
    assert launch_python(hunt(". env.sh && exec {worktree}/scripts/launch_server.sh --port {port}")) == "python3"
    assert launch_python(hunt("env A=1 nohup ~/v/bin/python3.11 srv.py {port}")) == "~/v/bin/python3.11"
