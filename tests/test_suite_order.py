"""The default run's longest tests start first (``tests/conftest.py``: ``LONGEST_FIRST``): a name
there that no longer names a test would silently start nothing first."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_put_first_still_exists_and_runs_in_the_default_run():
    for prefix in LONGEST_FIRST:
        path, _, name = prefix.partition("::")
        source = (ROOT / path).read_text()
        found = re.search(rf"^((?:@.*\n)*)def ({re.escape(name)}\w*)\(", source, re.M)
        assert found, f"{prefix}: no such test"
        assert "pytest.mark.slow" not in found.group(1), f"{prefix}: marked slow, not in the default run"
