"""`--metric` end to end: a repository whose benchmark behaves like sglang.bench_serving (a table on
stdout, one JSON line appended to --output-file) is hunted and bisected on its p99 TTFT."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git_in, sleuth_exe, sleuth_in_process
from tests.test_agent import fingerprint

BENCH = '''"""Like sglang.bench_serving: print the result table, append one JSON line to --output-file."""
import json, random, sys
from serving import PREFILL_MS

out = sys.argv[sys.argv.index("--output-file") + 1]
rng = random.Random()
ttft = [PREFILL_MS * rng.uniform(0.97, 1.03) for _ in range(20)]
result = {
    "output_throughput": 2400 * rng.uniform(0.98, 1.02),
    "p99_ttft_ms": max(ttft),
    "median_ttft_ms": sorted(ttft)[10],
    "p99_itl_ms": 22.3,
}
print("============ Serving Benchmark Result ============")
print(f"Output token throughput (tok/s):         {result['output_throughput']:.2f}")
print(f"P99 TTFT (ms):                           {result['p99_ttft_ms']:.2f}")
print(f"P99 ITL (ms):                            {result['p99_itl_ms']:.2f}")
print("=" * 50)
with open(out, "a") as f:
    f.write(json.dumps(result) + "\\n")
'''


def sleuth(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sleuth_exe(), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """8 commits; the 5th makes prefill slower (only TTFT moves), the others touch notes."""
    repo = tmp_path / "serving"
    repo.mkdir()
    git = git_in(repo)
    git("init", "-q")
    (repo / "serving.py").write_text("PREFILL_MS = 40.0\n")
    (repo / "bench_serving.py").write_text(BENCH)
    git("add", ".")
    git("commit", "-qm", "init")
    culprit = ""
    for i in range(1, 9):
        if i == 5:
            (repo / "serving.py").write_text("PREFILL_MS = 62.0  # chunked prefill off by default\n")
            git("commit", "-qam", "Disable chunked prefill by default")
            culprit = git("rev-parse", "HEAD")
        else:
            with open(repo / "NOTES.md", "a") as f:
                f.write(f"note {i}\n")
            git("add", "NOTES.md")
            git("commit", "-qm", f"docs: note {i}")
    return repo, culprit


def test_a_p99_ttft_regression_is_hunted_on_the_key_the_benchmark_writes(repo, tmp_path):
    path, culprit = repo
    before = fingerprint(path)
    proc = sleuth(
        "hunt", "--repo", str(path), "--good", "HEAD~8",
        "--bench", "python3 bench_serving.py --output-file {out}",
        "--metric", "p99_ttft_ms",
        "--db", str(tmp_path / "r.db"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = json.loads(proc.stdout)
    assert v["target"]["metric"] == "p99_ttft_ms" and v["target"]["higher_is_better"] is False  # from its name
    assert v["root_cause"]["kind"] == "commit" and v["root_cause"]["ref"] == culprit
    history = next(h for h in v["hypotheses"] if h["category"] == "history")
    assert history["status"] == "supported" and "p99_ttft_ms (+" in history["reason"]  # a latency that went up
    assert fingerprint(path) == before  # the {out} files lived in scratch worktrees


def test_bisect_reads_the_result_file_the_benchmark_names(repo, tmp_path):
    path, culprit = repo
    # A named file (a regex of the table is read the same way: tests/test_metric.py).
    flags = ["--bench", "python3 bench_serving.py --output-file result.jsonl", "--bench-output", "result.jsonl"]
    proc = sleuth(
        "bisect", "--repo", str(path), "--good", "HEAD~8", *flags, "--metric", "median_ttft_ms",
        "--workdir", str(tmp_path), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [c["sha"] for c in json.loads(proc.stdout)["culprits"]] == [culprit]
    assert not (path / "result.jsonl").exists()  # written in the scratch worktrees only


def test_without_a_metric_the_last_number_rule_warns(repo, tmp_path):
    path, _ = repo
    proc = sleuth_in_process(
        "bisect", "--repo", str(path), "--good", "HEAD~1",
        "--bench", "python3 bench_serving.py --output-file /dev/null", "--lower-is-better", "--workdir", str(tmp_path),
        "--max-wall", "2",
    )  # fmt: skip
    assert "the last number the benchmark prints" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench", "true", "--metric", "completed"], "--metric: cannot tell which way 'completed' is better"),
        (["--bench", "true", "--metric", "p99[", "--lower-is-better"], "--metric: 'p99[' is not a JSON key or path"),
        (["--bench", "true", "--metric", "x_ms", "--bench-output", "/tmp/x.json"], "--bench-output: '/tmp/x.json'"),
        (["--bench", "true {out}"], "--metric: name the key"),
        # a number with no name says nothing about its direction: the user does
        (["--bench", "true"], "--lower-is-better/--higher-is-better: required: the benchmark's number has no name"),
        (["--bench", "true", "--metric-regex", "took ([0-9.]+)"], "--lower-is-better/--higher-is-better: required"),
        (["--launch", "x {port}", "--served-model", "m", "--metric", "p42_ttft_ms"], "--metric: 'p42_ttft_ms'"),
        (["--launch", "x {port}", "--served-model", "m", "--metric-regex", "x"], "--metric-regex: only with --bench"),
        # A package or variable hunt has no commit to name: what to give then is said (a trial guessed).
        (
            ["--bench", "true", "--lower-is-better", "--good", ""],
            "`--good HEAD --good-value N` when the code has not changed",
        ),
    ],
)
def test_bad_metric_flags_are_one_line_exit_2(repo, tmp_path, args, message):
    path, _ = repo
    proc = sleuth_in_process("hunt", "--repo", str(path), "--good", "HEAD~1", *args, "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_number_read_by_regex_is_called_by_the_name_the_regex_reads_it_after():
    """A trial's hunt with `--metric-regex 'roundtrips_per_s ([\\d.]+)'` said "now: 84.2 value" in
    every line; a regex that names nothing keeps "value"."""
    from agent.metric_opts import resolve_metric

    named = resolve_metric(None, r"roundtrips_per_s ([\d.]+)", None, False, "python3 bench.py")
    assert named.metric == "roundtrips_per_s" and named.higher_is_better and named.regex
    assert resolve_metric(None, r"([\d.]+) ms", None, True, "python3 bench.py").metric == "value"
