"""Where a command's run store is: a path that cannot be one is one line and exit 2, never a
traceback, whichever way it was given (``--db`` or ``$SLEUTH_DB``)."""

from __future__ import annotations

import pytest

from tests.conftest import sleuth_in_process


@pytest.mark.parametrize(
    "args", [("runs",), ("show", "r1"), ("replay", "r1"), ("score", "r1", "--root-cause", "abcdef1")]
)
def test_sleuth_db_naming_a_folder_is_one_line_and_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.setenv("SLEUTH_DB", str(tmp_path))
    proc = sleuth_in_process(*args)
    said = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, said
    assert len(said.splitlines()) == 1 and "$SLEUTH_DB" in said and "is a folder" in said, said


def test_db_option_naming_a_folder_names_the_option(tmp_path):
    proc = sleuth_in_process("runs", "--db", str(tmp_path))
    said = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2 and said.count("\n") == 0 and "--db" in said, said


def test_a_store_that_does_not_exist_yet_is_still_refused_by_readers(tmp_path):
    proc = sleuth_in_process("runs", "--db", str(tmp_path / "none.db"))
    assert proc.returncode == 2 and "no run store here" in proc.stdout + proc.stderr
