"""``sleuth lab build``: JSON out on success; one line and exit 2 on bad input, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import MINIMAL_SPEC, sleuth_in_process


def sleuth(*args: str):
    return sleuth_in_process(*args)


def test_build_prints_what_it_built(write_spec, tmp_path):
    proc = sleuth("lab", "build", str(write_spec(MINIMAL_SPEC)), str(tmp_path / "out"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["scenario"] == "tiny" and len(out["head_sha"]) == 40
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "alert.json",
        "host",
        "repo",
        "truth.json",
        "world.json",
    ]


def test_a_bad_spec_is_one_line_exit_2_and_nothing_written(write_spec, tmp_path):
    bad = write_spec(MINIMAL_SPEC.replace('cost = "allreduce_eager"', 'cost = "allreduc"'), name="seed.toml")
    proc = sleuth("lab", "build", str(bad), str(tmp_path / "out"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: seed.toml: pulled[0].edits[0].effect.cost: unknown cost 'allreduc'")
    assert not (tmp_path / "out").exists()


def test_a_missing_spec_file_and_a_busy_target_are_bad_input(write_spec, tmp_path):
    assert sleuth("lab", "build", str(tmp_path / "nope.toml"), str(tmp_path / "o")).returncode == 2
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("keep")
    proc = sleuth("lab", "build", str(write_spec(MINIMAL_SPEC)), str(busy))
    assert proc.returncode == 2 and "not an empty directory" in proc.stderr
    assert (busy / "x").read_text() == "keep"


def test_a_real_cases_file_is_named_as_one_with_the_command_that_runs_it(tmp_path):
    """A real case's case.toml is not a lab spec: the line says so and names `sleuth eval`, where
    it said only that the alert was missing."""
    case = Path(__file__).parents[1] / "evals" / "suites" / "real" / "lizard_jsx_regex"
    proc = sleuth("lab", "build", str(case / "case.toml"), str(tmp_path / "out"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "a real case" in proc.stderr and f"sleuth eval {case}" in proc.stderr
    assert not (tmp_path / "out").exists()
