"""``sleuth bisect`` on a real lab repository; bad input is one line, exit 2, nothing left running."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from evals.lab.builder import build
from evals.lab.spec import load_spec
from tests.conftest import git_in, sleuth_exe, sleuth_in_process
from tools.bisect import log2_bound

SPEC = """
name = "bisect16"
seed = 16
[history]
filler = 2
[[committed]]
filler = 6
[[committed]]
id = "slow"
subject = "Fuse the shared expert into the routed GEMM"
edits = [{ path = "python/minisglang/models/deepseek_v2.py", effect = { cost = "moe_experts", add_us = 30 } }]
[[committed]]
filler = 8
[launch]
flags = []
[alert]
good = 89
bad = 79
give_good_ref = true
requests = 2
max_tokens = 24
[truth]
culprits = ["slow"]
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("b16")
    (root / "s.toml").write_text(textwrap.dedent(SPEC))
    return build(load_spec(root / "s.toml"), root / "scenario")


def sleuth(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sleuth_exe(), *args], capture_output=True, text=True, timeout=timeout)


def no_servers_left(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1


@pytest.mark.slow  # 15-20 s; lab bisections run in every hunt test and in bench/bisect_cost.py
def test_bisect_finds_the_lab_culprit_from_the_alert(scenario, tmp_path):
    proc = sleuth("bisect", "--alert", str(scenario.root / "alert.json"), "--workdir", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert [c["sha"] for c in res["culprits"]] == [scenario.truth["root_causes"][0]["ref"]]
    assert res["culprits"][0]["verified"]
    assert res["probes"] <= 1.5 * log2_bound(res["candidates"])  # the target: within 1.5x ceil(log2(N+1))
    assert no_servers_left(str(scenario.root))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--good", "no-such-ref"], "error: --good: unknown ref 'no-such-ref' in "),
        (["--repo", "/tmp"], "error: --repo: /tmp is not a git repository"),
        (["--host", "127.0.0.1:1"], "error: --host 127.0.0.1:1: "),
        (["--launch", "echo booting --port {port}; exit 3"], "error: --launch: the good reference "),
        # no {port}: the server listens where nothing looks, and each state waited out the launch timeout
        (["--launch", "serve --port 18999"], "error: --launch: 'serve --port 18999' has no {port}"),
        (["--launch", "serve --port {prot}"], "error: --launch: '{prot}' is not a placeholder sleuth fills"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(scenario, tmp_path, extra, expected):
    proc = sleuth_in_process("bisect", "--alert", str(scenario.root / "alert.json"), "--workdir", str(tmp_path), *extra)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith(expected), lines
    assert no_servers_left(str(scenario.root))


def test_warnings_before_a_bisection_reach_stderr_with_json_too(tiny, tmp_path):
    """As a hunt's: the number with no name taken from a serving benchmark (whose last number is
    nobody's metric) is said on stderr, and stdout is still the JSON alone (with --json the
    warning was dropped, so a script never learnt which number was taken). A command of one's own
    that prints one number is not warned (a trial's every --bench hunt was)."""
    repo, good = tiny
    for bench, warned in (("python3 bench.py --as sglang.bench_serving", True), ("python3 bench.py", False)):
        proc = sleuth_in_process(
            "bisect", "--repo", repo, "--good", good, "--bench", bench, "--lower-is-better",
            "--workdir", tmp_path / bench.replace(" ", "_"), "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert ("warning: no --metric or --metric-regex named" in proc.stderr) is warned, proc.stderr
        assert json.loads(proc.stdout)["culprits"]


def test_a_step_reverted_later_is_said_with_its_revert(tmp_path):
    """`sleuth bisect` finds where the metric first moved: a step a later commit reverted, then
    re-landed, was named with confidence 100 % and not a word of the revert (a toolz trial's).
    The text says the revert and that a hunt follows it; the JSON lists it."""
    from tests.worlds import _reland

    repo, good, _reland_sha = _reland(tmp_path)
    args = ["bisect", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better"]
    proc = sleuth_in_process(*args, "--workdir", tmp_path / "w")
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = git_in(repo)("log", "--format=%H", "--grep", "^Cache nothing", "--reverse").split()[0]
    revert = git_in(repo)("log", "--format=%H", "--grep", "^Revert").split()[0]
    said = f'note: {first[:10]} was reverted later by {revert[:10]} "Revert "Cache nothing""'
    assert said in proc.stdout and "`sleuth hunt` measures the revert and follows it" in proc.stdout
    got = json.loads(sleuth_in_process(*args, "--workdir", tmp_path / "w2", "--json").stdout)
    assert got["reverted_later"] == {first: [revert]}


def test_a_sample_budget_ends_the_bisection_inconclusive_naming_it(tiny, tmp_path):
    """`--max-samples` holds: no sample past it is taken, and the line says which budget stopped
    the bisection and what it had found (exit 1, JSON `stopped`)."""
    repo, good = tiny
    args = ["bisect", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better"]
    proc = sleuth_in_process(*args, "--workdir", tmp_path / "w", "--max-samples", "12")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "inconclusive: sample budget of 12 spent (10 taken): no step found" in proc.stdout
    got = sleuth_in_process(*args, "--workdir", tmp_path / "w2", "--max-samples", "12", "--json")
    assert got.returncode == 1 and json.loads(got.stdout)["stopped"] == "sample budget of 12 spent (10 taken)"
    done = json.loads(sleuth_in_process(*args, "--workdir", tmp_path / "w3", "--json", "--max-culprits", "1").stdout)
    assert done["stopped"] is None and len(done["culprits"]) == 1


def test_a_sample_budget_spent_after_a_probe_decided_says_the_range_left(tmp_path):
    """Trial 20: "no step found" after a probe had decided, and nothing said where the step was
    left to be found. The line and the JSON (`narrowed`) give the range."""
    from tests.conftest import one_slow_commit

    repo, good, slow = one_slow_commit(tmp_path / "r", 8, 6)
    args = ["bisect", "--repo", repo, "--good", good, "--bench", "python3 bench.py", "--lower-is-better"]
    proc = sleuth_in_process(*args, "--workdir", tmp_path / "w", "--max-samples", "27")
    line = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 1 and line.startswith("inconclusive: sample budget of 27 spent ("), line
    assert ": no step found; the search had narrowed 8 commits to 4 (" in line, line
    got = json.loads(sleuth_in_process(*args, "--workdir", tmp_path / "w2", "--max-samples", "27", "--json").stdout)
    assert len(got["narrowed"]) == 4 and slow in got["narrowed"]


def test_a_good_ref_that_is_the_bad_one_is_said_so(tiny, tmp_path):
    """`--good HEAD` said "HEAD is not an ancestor of HEAD", where git counts a commit its own."""
    repo, _good = tiny
    proc = sleuth_in_process("bisect", "--repo", repo, "--good", "HEAD", "--bench", "python3 bench.py",
                             "--lower-is-better", "--workdir", tmp_path / "w")  # fmt: skip
    said = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and said.startswith("error: --good: HEAD and --bad HEAD are the same commit "), said


def test_in_a_pipe_the_culprits_are_tab_separated_lines_whole(tiny, tmp_path):
    """Trial 20: piped to a file, the culprits were a box-drawn table wrapped at 80 columns, the
    subject over three lines. In a pipe each culprit is one tab-separated line, as `sleuth runs`."""
    repo, good = tiny
    git = git_in(repo)
    proc = sleuth_in_process("bisect", "--repo", repo, "--good", good, "--bench", "python3 bench.py",
                             "--lower-is-better", "--workdir", tmp_path / "w")  # fmt: skip
    lines = proc.stdout.splitlines()
    header = lines.index("commit\tsubject\tchange\tp\tverified\tsuspects")
    culprit = git("rev-list", "--reverse", f"{good}..HEAD").split()[1]
    assert lines[header + 1].split("\t")[:2] == [culprit[:12], "change 2"], lines
    assert not any(c in proc.stdout for c in "┃│━─"), proc.stdout
