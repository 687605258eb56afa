"""Real regressions from public repositories, run offline from committed git bundles and scored by
``sleuth eval`` like lab scenarios (``evals.realworld``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from evals.realworld import build_case, load_case
from tests.conftest import git_in, sleuth_in_process

REAL = Path(__file__).resolve().parents[1] / "evals" / "suites" / "real"
LIZARD = REAL / "lizard_jsx_regex" / "case.toml"


def git(repo: Path, *args: str) -> str:
    return git_in(repo)(*args)


def is_ancestor(repo: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", a, b]).returncode == 0


def test_every_case_names_its_report_fix_licence_and_full_shas_and_its_bundle_holds_them(tmp_path):
    cases = sorted(REAL.glob("*/case.toml"))
    assert cases
    for spec in cases:
        case = load_case(spec)
        assert (spec.parent / case.licence).is_file() and (spec.parent / "SOURCE.md").is_file()
        built = build_case(spec, tmp_path / case.name)
        assert git(built.repo, "rev-parse", "HEAD") == case.bad
        assert git(built.repo, "status", "--porcelain") == ""  # a clean checkout of the bad commit
        # The culprit lies between the known-good and the bad commit.
        assert (
            subprocess.run(
                ["git", "-C", str(built.repo), "merge-base", "--is-ancestor", case.good, case.culprit]
            ).returncode
            == 0
        )
        assert (
            subprocess.run(
                ["git", "-C", str(built.repo), "merge-base", "--is-ancestor", case.culprit, case.bad]
            ).returncode
            == 0
        )
        assert built.truth["root_causes"] == [{"kind": "commit", "ref": case.culprit}]


MERGED = [LIZARD, REAL / "pygments_lua_indent" / "case.toml"]


@pytest.mark.parametrize("spec", MERGED, ids=[p.parent.name for p in MERGED])
def test_these_culprits_came_in_through_a_merged_side_branch(tmp_path, spec):
    case = load_case(spec)
    repo = build_case(spec, tmp_path / "c").repo
    mainline = git(repo, "rev-list", "--first-parent", f"{case.good}..{case.bad}").split()
    assert case.culprit not in mainline and case.culprit in git(repo, "rev-list", f"{case.good}..{case.bad}").split()


def test_sleuth_eval_names_the_real_culprit_offline(tmp_path):
    db = tmp_path / "runs.db"
    proc = sleuth_in_process("eval", str(LIZARD), "--json", "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:]
    row = json.loads(proc.stdout)["rows"][0]
    assert row["exact"] and row["named"] == [load_case(LIZARD).culprit], row
    assert row["repo_intact"]


SLOW_CASES = sorted(p for p in REAL.glob("*/case.toml") if p != LIZARD)  # the fast subset is lizard's
# A 1.3x step under 10-20 % noise is named most of the time, not every time (3 of 5 here, one
# miss under a neighbour's load): its hunt must run and be scored, its exactness is the bench's.
NOISY = {"pyparsing_import_time"}


@pytest.mark.slow  # 30 s to 4 min each (cmark builds every probe); .ci/run runs them (README: the real-world table)
@pytest.mark.timeout(600)  # cmark's took 240 s beside two other hunts on two cores: 300 s is too close
@pytest.mark.parametrize("spec", SLOW_CASES, ids=[p.parent.name for p in SLOW_CASES])
def test_sleuth_eval_names_every_real_culprit_offline(tmp_path, spec):
    proc = sleuth_in_process("eval", str(spec), "--json", "--db", str(tmp_path / "runs.db"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    row = json.loads(proc.stdout)["rows"][0]
    assert row["repo_intact"] and row["status"] in ("awaiting_approval", "concluded"), (row["error"], row)
    if spec.parent.name in NOISY:  # scored, not asserted: bench/real_cases.py counts how often
        return
    assert row["exact"] and row["named"] == [load_case(spec).culprit], row


def test_the_pyparsing_range_holds_a_commit_that_does_not_import_and_the_hunt_skips_it(tmp_path):
    spec = REAL / "pyparsing_import_time" / "case.toml"
    case = load_case(spec)
    repo = build_case(spec, tmp_path / "c").repo
    broken = "940636a69dbb279e5f6e1f1e07636e74ef8d950f"  # "Update some internal type annotations"
    assert is_ancestor(repo, case.culprit, broken) and is_ancestor(repo, broken, case.bad)
    git(repo, "checkout", "-q", broken)
    bench = subprocess.run(
        ["python3", str(spec.parent / "bench.py")], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert bench.returncode != 0 and "NameError" in bench.stderr


def test_a_case_with_a_short_sha_is_bad_input_naming_the_field(tmp_path):
    text = LIZARD.read_text().replace('culprit = "b7453df0a81a6bf3063bf6ebc462efaac65ece77"', 'culprit = "b7453df"')
    spec = tmp_path / "case.toml"
    spec.write_text(text)
    proc = sleuth_in_process("eval", str(spec), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {spec}: culprit:")


def test_a_real_case_ships_its_folder_to_a_worker_that_does_not_share_the_drivers_disk(tmp_path):
    """A Ray worker on another machine gets the spec's text and the case's files (bundle, bench
    script) in the job; it builds and hunts the case from those alone (here the spec path does
    not exist, as on such a worker), and a lab spec needs none: its text builds everything."""
    from evals.job import Job, run_job, shipped

    job = shipped(Job(spec=str(LIZARD), max_wall_s=8))
    files = job.case_files or {}
    assert files["history.bundle"] == (LIZARD.parent / "history.bundle").read_bytes() and "bench.py" in files
    assert "case_files" not in job.model_dump()  # never in a result row or the store
    lab = shipped(Job(spec=str(REAL.parent / "core" / "noise_only.toml")))
    assert lab.case_files is None and lab.spec_text
    away = job.model_copy(update={"spec": str(tmp_path / "elsewhere" / "case.toml")})  # not on this disk
    out = run_job(away)
    assert "error" not in out, out.get("traceback")
    assert out["truth"]["root_causes"] == [{"kind": "commit", "ref": load_case(LIZARD).culprit}]
    assert out["measurements"] and out["repo_intact"]  # its benchmark ran from the shipped files
