"""How the test runs are arranged (``tests/conftest.py``): the default run's longest tests start
first (``LONGEST_FIRST``: a name there that no longer names a test would silently start nothing
first), and in .ci/run's slow step the worker beside the real cases lowers its priority."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_put_first_still_exists_and_runs_in_the_default_run():
    for prefix in LONGEST_FIRST:
        path, _, name = prefix.partition("::")
        source = (ROOT / path).read_text()
        found = re.search(rf"^((?:@.*\n)*)def ({re.escape(name)}\w*)\(", source, re.M)
        assert found, f"{prefix}: no such test"
        assert "pytest.mark.slow" not in found.group(1), f"{prefix}: marked slow, not in the default run"


class _Item:
    """What ``pytest_runtest_setup`` reads of a test: its xdist_group marks."""

    def __init__(self, *groups: str) -> None:
        self.groups = groups

    def iter_markers(self, name: str):
        return [pytest.mark.xdist_group(g).mark for g in self.groups] if name == "xdist_group" else []


def test_a_slow_step_worker_lowers_its_priority_once_at_its_first_test_outside_the_real_cases(monkeypatch):
    """.ci/run's slow step: the real cases' worker keeps its priority, the other lowers its own."""
    from tests import conftest

    niced: list[int] = []
    monkeypatch.setattr(conftest.os, "nice", niced.append)
    monkeypatch.setattr(conftest, "_NICED", [])
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.delenv("SLEUTH_NICE_BESIDE", raising=False)
    conftest.pytest_runtest_setup(_Item())  # the default run: never
    assert niced == []
    monkeypatch.setenv("SLEUTH_NICE_BESIDE", "real_cases")
    conftest.pytest_runtest_setup(_Item("real_cases"))  # a real case: its worker keeps its priority
    assert niced == []
    conftest.pytest_runtest_setup(_Item())  # a lab hunt beside it
    conftest.pytest_runtest_setup(_Item("terminal_report"))
    assert niced == [10]  # once: nice is relative, and a worker never gets its priority back
    monkeypatch.setattr(conftest, "_NICED", [])
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    conftest.pytest_runtest_setup(_Item())  # no xdist: one process runs everything, never niced
    assert niced == [10]
