"""`sleuth eval`: a suite in worker processes, scored, stored as a set; rescored and compared without
running a probe; a scenario that crashes counts as failed and the set goes on."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap

from tests.conftest import sleuth_exe, sleuth_in_process
from tests.llm_server import ScriptedLLM
from tests.test_llm_policy import calls
from transcripts.store import Store

# TP-4 on eight GPUs: a two-slot host (A/Bs on two warm servers), which keeps this suite quick.
TINY = """
name = "tiny"
seed = 7
[system]
tp = 4
[history]
filler = 2
[[committed]]
filler = 1
[[committed]]
id = "slow"
subject = "Synchronize the stream after every routing step"
edits = [{ path = "python/minisglang/layers/moe/topk.py", effect = { cost = "moe_topk", add_us = 40 } }]
[[committed]]
filler = 2
[launch]
flags = []
[alert]
good = 89
bad = 70
give_good_ref = true
requests = 2
max_tokens = 24
[truth]
culprits = ["slow"]
"""

# TINY with a step three times as large (89 -> 50 tok/s, not 70), for the live tests whose subject
# is a path (a backend, the service, the approval page, a killed service), not the hunt's
# resolution: beside a busy loop per core (the flake meter's load) TINY's 21 % step was once not
# named exactly through Ray and once left undecided on the approval page (79.7 vs 66.2, p = 0.014).
LOUD = TINY.replace("add_us = 40", "add_us = 120").replace("bad = 70", "bad = 50")

BROKEN = """
name = "broken"
[[committed]]
filler = 2
[[uncommitted]]
path = "python/minisglang/layers/moe/topk.py"
effect = { cost = "moe_topk", add_us = 10 }
[[uncommitted]]
path = "python/minisglang/layers/moe/topk.py"
effect = { cost = "moe_topk", add_us = 20 }
[[uncommitted]]
path = "python/minisglang/layers/moe/topk.py"
effect = { cost = "moe_topk", add_us = 30 }
[alert]
good = 89
bad = 70
"""


def sleuth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sleuth_exe(), *args], capture_output=True, text=True, timeout=600)


def test_a_suite_runs_scores_rescores_and_compares(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tiny.toml").write_text(textwrap.dedent(LOUD))  # the subject is the suite, not the resolution
    (suite / "broken.toml").write_text(textwrap.dedent(BROKEN))  # valid spec, but it cannot be built
    db, report = tmp_path / "runs.db", tmp_path / "out" / "report.md"
    report.parent.mkdir()
    proc = sleuth("eval", str(suite), "--workers", "2", "--db", str(db), "--json", "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    rows = {r["scenario"]: r for r in res["rows"]}
    assert rows["tiny"]["exact"] and rows["tiny"]["repo_intact"] and rows["tiny"]["approval_before_mutation"]
    assert "error" in rows["broken"] and res["aggregate"]["crashed"] == 1
    text = report.read_text()
    assert "| tiny | commit:" in text and (report.parent / "report-accuracy.png").stat().st_size > 5000
    run_id = sqlite3.connect(db).execute("select run_id from eval_results where scenario = 'tiny'").fetchone()[0]
    assert sleuth_in_process("replay", run_id, "--db", str(db)).returncode == 0  # an eval run is a replayable run
    # ...but not one to approve: its world is gone once scored. A trial's store listed it
    # "awaiting_approval", the page offered Approve, and `sleuth approve` said "no run".
    listed = json.loads(sleuth_in_process("runs", "--db", str(db), "--json").stdout)
    row = next(r for r in listed if r["id"] == run_id)
    assert row["status"] == "concluded" and row["action"] == "revert not applied (evaluation)", row
    refused = sleuth_in_process("approve", run_id, "--db", str(db))
    assert refused.returncode == 2 and f"is a run of evaluation {res['set']}" in refused.stderr, refused.stderr

    # a second set: the LLM policy, its model a scripted server the worker process reaches over HTTP
    # (a model that gives up at once: the set is scored as such, with its tokens counted)
    with ScriptedLLM([calls(("conclude", {"kind": "none", "summary": "looks like noise"}))]) as llm:
        other = sleuth(
            "eval", str(suite / "tiny.toml"), "--policy", "llm", "--model", "scripted", "--base-url", llm.base_url,
            "--db", str(db), "--json",
        )  # fmt: skip
    assert other.returncode == 0, other.stderr[-3000:]
    row = json.loads(other.stdout)["rows"][0]
    assert row["got_kind"] == "none" and not row["exact"] and row["llm_tokens"] == 120
    proc = sleuth_in_process("eval", "--compare", res["set"], json.loads(other.stdout)["set"], "--db", str(db))
    assert proc.returncode == 0 and "methodical" in proc.stdout and "llm" in proc.stdout
    assert "| tiny | yes | no |" in proc.stdout

    # A CI gate: a set scored below --min-exact exits 1 (every scenario wrong had exited 0).
    llm_set = json.loads(other.stdout)["set"]
    gated = sleuth_in_process("eval", "--rescore", llm_set, "--min-exact", "0.5", "--db", str(db))
    assert gated.returncode == 1 and "exact 0 % is below --min-exact 50 %" in gated.stderr, gated.stderr
    assert sleuth_in_process("eval", "--rescore", llm_set, "--min-exact", "0", "--db", str(db)).returncode == 0

    proc = sleuth_in_process("eval", "--rescore", res["set"], "--db", str(db), "--json")
    rescored = json.loads(proc.stdout)
    assert proc.returncode == 0 and rescored["aggregate"]["exact"] == res["aggregate"]["exact"]
    # Each row names the run it scored (a wrong row leads to `sleuth replay RUN`), in the same
    # shape from a run of the set and from its rescore.
    assert rows["tiny"]["run_id"] == run_id and rows["tiny"]["repeat"] == 0

    def named(rows: list[dict]) -> list[tuple[str, str]]:
        return [(r["scenario"], r["run_id"]) for r in rows]

    assert named(rescored["rows"]) == named(res["rows"])


def test_eval_bad_input_is_one_line_exit_2_and_leaves_no_store_behind(tmp_path):
    db = tmp_path / "r.db"
    proc = sleuth_in_process("eval", str(tmp_path / "nope"), "--db", str(db))
    assert proc.returncode == 2 and "PATH:" in proc.stderr and "nope" in proc.stderr
    (tmp_path / "bad.toml").write_text("name = 'x'\n[alert]\ngood = 1\n")
    proc = sleuth_in_process("eval", str(tmp_path / "bad.toml"), "--db", str(db))
    assert proc.returncode == 2 and "bad.toml: alert.bad: required field missing" in proc.stderr
    # A set to rescore, compare or resume is looked for in a store that exists; none was made.
    for args in (["--rescore", "set-none"], ["--compare", "set-a", "set-b"], ["--resume", "set-none"]):
        proc = sleuth_in_process("eval", *args, "--db", str(db))
        assert proc.returncode == 2 and proc.stderr.strip() == f"error: --db: {db}: no run store here", proc.stderr
    assert not db.exists()
    Store(db).close()  # an empty store: the set is what is missing
    proc = sleuth_in_process("eval", "--rescore", "set-none", "--db", str(db))
    assert proc.returncode == 2 and "SET:" in proc.stderr


def test_a_set_in_which_no_run_could_be_scored_exits_1_naming_each_crash(tmp_path):
    (tmp_path / "broken.toml").write_text(textwrap.dedent(BROKEN))  # valid, but it cannot be built
    proc = sleuth_in_process("eval", str(tmp_path / "broken.toml"), "--db", str(tmp_path / "runs.db"))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "broken: crashed: " in proc.stdout + proc.stderr and "exact 0 % of 1 runs" in proc.stdout


def test_a_real_case_without_its_history_is_bad_input_naming_the_file(tmp_path):
    """A case folder copied without its bundle (an install that left the data out): one line
    naming the missing file, exit 2, before any run starts."""
    import shutil
    from pathlib import Path

    case = tmp_path / "lizard_jsx_regex"
    shutil.copytree(Path(__file__).parent.parent / "evals/suites/real/lizard_jsx_regex", case)
    (case / "history.bundle").unlink()
    proc = sleuth_in_process("eval", str(case), "--db", str(tmp_path / "runs.db"))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"error: {case / 'history.bundle'}: missing (named by case.toml; the case cannot be unpacked)"
    )
