"""A start of ``sleuth`` imports what its command runs: listing runs or showing one does not load
the hunt's graph, scipy or matplotlib (seconds of CPU at every start of the CLI, which the web
page's approvals, the service's jobs and every script pay); help lists every command."""

from __future__ import annotations

import json
import os
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


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["hunt", "--samples", "2"],
            "error: Invalid value for '--samples': Input should be greater than or equal to 3",
        ),
        (
            ["bisect", "--max-wall", "-5"],
            "error: Invalid value for '--max-wall': Input should be greater than or equal",
        ),
        (["hunt", "--nope"], "error: No such option: --nope"),
        # click lets the last of a flag pair win: a latency rise was read as "no regression"
        (["hunt", "--lower-is-better", "--higher-is-better"], "error: --lower-is-better/--higher-is-better: give one"),
    ],
)
def test_a_usage_error_is_one_line_exit_2_like_every_other_bad_input(args, expected):
    """click framed these in a box of a dozen lines (exit 2 all the same)."""
    from tests.conftest import sleuth_exe

    proc = subprocess.run([sleuth_exe(), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(expected), proc.stderr


def test_a_command_and_a_launch_at_once_are_refused_not_one_ignored(tmp_path):
    for command in ("hunt", "bisect"):
        proc = sleuth_in_process(command, "--bench", "python3 b.py", "--launch", "serve --port {port}")
        assert proc.returncode == 2 and proc.stderr.startswith("error: --bench/--launch: give one"), proc.stderr


def test_a_direction_against_the_metrics_name_is_taken_and_said():
    from agent.metric_opts import resolve_metric

    given = resolve_metric("p99_latency_ms", None, None, False, "python3 b.py")  # --higher-is-better
    assert given.higher_is_better and "'p99_latency_ms' reads as lower-is-better by its name" in given.warning
    assert resolve_metric("p99_latency_ms", None, None, True, "python3 b.py").warning is None
    assert resolve_metric("tok_per_s", None, None, None, None).warning is None


def test_help_into_a_pipe_names_every_option_whole():
    """`sleuth hunt --help | less` was drawn 80 columns wide and cut option names
    ("--higher-is-bet..."), a trial's first read of the options."""
    from tests.conftest import sleuth_exe

    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_WIDTH"}
    out = subprocess.run([sleuth_exe(), "hunt", "--help"], capture_output=True, text=True, env=env, timeout=120).stdout
    assert "--higher-is-better" in out and "--lower-is-better" in out and "…" not in out.split("Options")[1]
