"""A start of ``sleuth`` imports what its command runs: listing runs or showing one does not load
the hunt's graph, scipy or matplotlib (seconds of CPU at every start of the CLI, which the web
page's approvals, the service's jobs and every script pay); help lists every command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import sleuth_in_process

HEAVY = ("langgraph", "scipy", "matplotlib", "openai")
PROBE = """
import json, sys
from agent.cli import main
sys.argv = ["sleuth", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def _loaded(args: list[str]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["runs", "--json"], ["show", "no-such-run"], ["bench", "--help"]])
def test_a_light_command_starts_without_the_hunts_machinery(tmp_path, args):
    assert _loaded([*args, *(["--db", str(tmp_path / "r.db")] if args[0] != "bench" else [])]) == []


def test_the_hunt_loads_what_it_needs_and_help_lists_every_command():
    # The graph, but neither the model SDK nor scipy until a model is asked or a statistic computed:
    # they were half of a hunt's, an approval's or a rejection's start (5.3 -> 2.6 s of CPU here).
    assert _loaded(["hunt", "--help"]) == ["langgraph"]
    assert _loaded(["reject", "no-such-run", "--reason", "x", "--db", "/nonexistent/r.db"]) == ["langgraph"]
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from agent.cli import main; sys.argv = ['sleuth', '--help']; main()"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    for command in ("bench", "bisect", "demo", "hunt", "approve", "resume", "runs", "show", "serve", "lab", "eval"):
        assert f" {command} " in proc.stdout, command


def test_a_bad_input_line_prints_brackets_as_they_are():
    """An error names what the user gave; brackets in it are text, not Rich markup (a ref such as
    'v1[bold]' or a path with '[x]' lost them)."""
    proc = sleuth_in_process("bench", "--endpoint", "host[bold]:1", "--model", "m")
    assert proc.returncode == 2 and "'host[bold]:1' is not an http(s) URL" in proc.stderr
