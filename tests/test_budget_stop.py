"""A budget that stops a hunt is the run's one line, and nothing a confirmation dropped is left in
it: a toolz trial's hunt named a YAML-only commit, its confirmation dropped it, the next search ran
out of probes, and the report, `sleuth runs` and the summary still named the dropped commit while
only ``error`` said which budget stopped it."""

from __future__ import annotations

from agent import policy
from agent.graph import Hunter
from agent.report import markdown, verdict
from agent.runtime import BudgetExhausted
from agent.state import Hunt, Target

STOPPED = "probe budget of 20 exhausted; the bisection had narrowed 27 commits to 1 (6e2391c31e)"


def _stop_in_a_node(tmp_path, hunt: Hunt) -> Hunt:
    """Run one graph node that spends the last of the budget, as the hunt's own nodes do."""
    hunter = Hunter(tmp_path / "r.db", tmp_path / "runs")
    try:
        hunter.store.start_run(hunt.run_id)

        def spend(_hunt: Hunt, _rt) -> None:
            raise BudgetExhausted(STOPPED)

        out = hunter._node(spend, "localize")({"hunt": hunt.model_dump(mode="json")})
    finally:
        hunter.close()
    return Hunt.model_validate(out["hunt"])


def _named(tmp_path) -> Hunt:
    hunt = Hunt(run_id="r1", target=Target(repo=str(tmp_path)))
    hunt.root_kind, hunt.root_ref = "commit", "775434a252" + "0" * 30
    hunt.culprits = [hunt.root_ref]
    hunt.root_summary = '775434a252 "Oops update to pypa/gh-action-pypi-publish@v1.8.1"'
    hunt.confirmation = {"text": "culprit^ 2.603 vs culprit 2.349 value (-9.8%, p=0.16, unknown)"}
    return hunt


def test_a_culprit_its_confirmation_dropped_is_not_the_line_of_a_run_a_budget_then_stopped(tmp_path):
    hunt = _named(tmp_path)
    hunter = Hunter(tmp_path / "r0.db", tmp_path / "runs0")
    try:
        policy.confirm_failed(hunt, hunter.runtime(hunt))  # bisect again, verified
    finally:
        hunter.close()
    assert (hunt.root_kind, hunt.culprits, hunt.root_summary) == (None, [], "")
    stopped = _stop_in_a_node(tmp_path, hunt)
    v = verdict(stopped)
    assert v["status"] == "inconclusive" and v["root_cause"] is None
    assert v["summary"] == f"stopped: {STOPPED}" and v["error"] == STOPPED
    report = markdown(stopped)
    assert f"stopped: {STOPPED}" in report and "775434a252" not in report.split("## Numbers")[0]


def test_a_budget_that_stops_a_hunt_after_it_named_a_cause_is_said_after_it(tmp_path):
    hunt = _named(tmp_path)
    stopped = _stop_in_a_node(tmp_path, hunt)
    assert stopped.root_summary == f'775434a252 "Oops update to pypa/gh-action-pypi-publish@v1.8.1"; stopped: {STOPPED}'
    again = _stop_in_a_node(tmp_path, stopped.model_copy(update={"status": "running", "run_id": "r2"}))
    assert again.root_summary.count(STOPPED) == 1  # said once


def test_samples_a_budget_stopped_mid_measurement_are_in_the_numbers(tmp_path):
    """The wall budget runs out while a measurement is sampling: what it had taken is a row of the
    Numbers of its own ("(stopped by the budget)"), so every sample the Cost counts is shown (a
    trial's Cost said 15 samples and its table 5). A sample takes a second: the budget ends inside
    a measurement, not in the milliseconds between two."""
    import json

    from tests.conftest import bench_repo, hunt_bench, sleuth_in_process

    slow = "import time, random, lib; time.sleep(1.0); print(lib.COST * random.gauss(1, 0.005))\n"
    repo, git, good = bench_repo(tmp_path / "slow", bench=slow)
    (repo / "lib.py").write_text("COST = 2.0\n")
    git("commit", "-qam", "slower")
    db = tmp_path / "r.db"
    v = hunt_bench(repo, good, db, "--max-wall", "11", "--good-value", "1.0", "--no-trace-paths")
    assert v["status"] == "inconclusive" and "wall-time budget" in v["summary"], v["summary"]
    shown = json.loads(sleuth_in_process("show", v["run_id"], "--json", "--db", db).stdout)["measurements"]
    most: dict[tuple[str, str], int] = {}  # a state measured again holds its earlier samples too
    for m in shown:
        key = (m["ref"], m["label"])
        most[key] = max(most.get(key, 0), len(json.loads(m["samples"])))
    assert sum(most.values()) == v["cost"]["samples"] > 0, (most, v["cost"])


def _candidate_with_step(tmp_path, step: float) -> Hunt:
    """A bisection's candidate, not yet confirmed, whose own step (culprit^ to culprit) is ``step``
    of a 0.30 -> 0.46 drop; the rest of the drop lies further up the range."""
    from agent.state import Measured

    shas = [f"{i:040x}" for i in range(1, 6)]  # good, a, candidate, b, HEAD
    levels = [0.30, 0.30, 0.30 + 0.16 * step, 0.30 + 0.16 * step, 0.46]
    hunt = Hunt(run_id="r1", target=Target(repo=str(tmp_path), higher_is_better=False))
    hunt.good_candidate, hunt.bisected = shas[0], shas[1:]
    for i, (sha, level) in enumerate(zip(shas, levels, strict=True)):
        samples = [level * (1 + d) for d in (-0.01, -0.005, 0.0, 0.005, 0.01, 0.0)]
        hunt.measurements.append(
            Measured(id=f"m{i + 1}", label=f"bisect {sha[:8]}", ref=sha, launch="", samples=samples,
                     median=level, ci_low=level * 0.99, ci_high=level * 1.01, cv=0.01)
        )  # fmt: skip
    hunt.root_kind, hunt.root_ref, hunt.culprits = "commit", shas[2], [shas[2]]
    hunt.root_summary = f'{shas[2][:10]} "Refactor HTML Parser (#803)"'
    return hunt


def test_an_unconfirmed_candidate_with_a_small_step_of_its_own_is_not_named_when_the_budget_stops(tmp_path):
    """A trial's hunt on a loaded machine was stopped mid-confirmation and named the wrong commit
    "likely": its own step was 12 % of the drop. Under half of the drop, an unconfirmed candidate
    is said, not named; over half, it stays the named (likely) cause."""
    weak = _stop_in_a_node(tmp_path, _candidate_with_step(tmp_path, 0.12))
    v = verdict(weak)
    assert v["root_cause"] is None and v["culprits"] == []
    assert v["summary"] == (
        f"stopped: {STOPPED}; the bisection's candidate {f'{3:040x}'[:10]} was not confirmed, and its own step is "
        "12% of the drop: not named"
    ), v["summary"]
    strong = verdict(_stop_in_a_node(tmp_path / "s", _candidate_with_step(tmp_path, 0.9)))
    assert strong["root_cause"]["ref"] == f"{3:040x}" and strong["root_cause"]["evidence"] == "likely"


def test_the_time_a_run_lay_dead_between_drivers_is_not_spent_from_its_wall_budget(tmp_path):
    """A hunt killed 30 s in and resumed eight hours later had spent its 600 s budget overnight:
    the budget counted from the hunt's start. The time from the dead driver's last step to the
    resume is left out, for the wall budget and the clock a person reads."""
    import time

    import pytest

    from agent.runtime import RESUMED, Runtime
    from agent.state import Budget
    from transcripts.store import Store

    now = time.time()
    hunt = Hunt(run_id="r", target=Target(repo=str(tmp_path)), budget=Budget(max_wall_s=600), started_at=now - 8 * 3600)
    store = Store(tmp_path / "r.db")
    try:
        store.start_run("r")
        store.event("r", "note", "measuring now", t=hunt.started_at + 30)  # then a SIGKILL
        store.event("r", "note", RESUMED, {"phase": "resume"}, t=now - 10)  # the next morning
        rt = Runtime(hunt, tmp_path / "runs" / "r", store=store)
        assert rt.budget_start(hunt) == pytest.approx(now - 40, abs=0.01)
        rt.check_wall(hunt)  # 40 s of the 600 spent: goes on (it raised "wall-time budget of 600 s exhausted")
    finally:
        store.close()


def test_resuming_a_hunt_a_budget_stopped_says_what_goes_on_from_there(tmp_path):
    """A trial resumed a hunt its 150 s budget had stopped after narrowing 39 commits to 2, and was
    told only "has ended (inconclusive)". The refusal names the budget and that a new hunt goes on
    (live: which probe the budget stops at moves with noise)."""
    from tests.conftest import hunt_bench, sleuth_in_process
    from tests.worlds import _reland

    repo, good, _reland_sha = _reland(tmp_path)  # the world `reland_narrowed` hunts, stopped as it is
    db = tmp_path / "r.db"
    v = hunt_bench(repo, good, db, "--max-probes", "4")
    assert v["status"] == "inconclusive", (v["status"], v["error"])
    proc = sleuth_in_process("resume", v["run_id"], "--db", db)
    said = proc.stderr.strip()
    assert proc.returncode == 2 and said.startswith(f"error: RUN: run '{v['run_id']}' has ended (inconclusive): "), said
    assert "probe budget of 4 exhausted; a new hunt with a larger budget goes on" in said, said


def test_the_range_a_stopped_bisection_narrowed_to_is_where_a_new_hunt_starts(tmp_path):
    """The trial's stop: "--good A^" of the range it had narrowed to. Not where a commit of that
    range was reverted later (the recorded world `reland_narrowed`): the cause at HEAD may lie
    outside it, as its stop says."""
    import json

    from agent.hunt_cmd import _go_on_said
    from tests.worlds import load

    def said(error: str) -> str:
        return _go_on_said(Hunt(run_id="r", target=Target(repo="/r"), error=error, status="inconclusive"))

    trial = "wall-time budget of 150 s exhausted; the bisection had narrowed 39 commits to 2 (64574e19b8^..103877ea3e)"
    assert said(trial) == (
        ": wall-time budget of 150 s exhausted; a new hunt with a larger budget goes on "
        "(--good 64574e19b8^ searches only the 2 commit(s) it narrowed to)"
    )
    relanded = json.loads(load("reland_narrowed", tmp_path / "r.db")["run"]["verdict"])["error"]
    assert "outside this range" in relanded and said(relanded).endswith("a new hunt with a larger budget goes on")
    assert said("store: disk full") == ""


def _two_steps(root):
    """32 commits after good, each touching executed code: the 8th makes the benchmark 1.5x as
    slow, the 24th 1.5x again; returns (repo, good, its git, the range's shas oldest first)."""
    from tests.conftest import BENCH, bench_repo

    repo, git, good = bench_repo(root, BENCH, {"lib.py": "import extra\nCOST = 1.0\n", "extra.py": ""})
    for i in range(1, 33):
        if i in (8, 24):
            (repo / "lib.py").write_text(f"import extra\nCOST = {1.5 if i == 8 else 2.25}\n")
        else:
            (repo / "extra.py").write_text((repo / "extra.py").read_text() + f"X{i} = {i}\n")
        git("commit", "-qam", f"change {i}")
    return repo, good, git, git("rev-list", "--reverse", f"{good}..HEAD").split()


def test_a_budget_spent_in_the_search_above_a_found_step_names_that_step_and_the_range_above_it(tmp_path):
    """The search for a second step judges its probes against the first step's level: the line
    said the whole range's decisions, "narrowed 32 commits to 8", eight commits that held neither
    step, and the step found was not named. Now it names the step and narrows only the range above
    it, by that search's own decisions."""
    import re

    from tests.conftest import hunt_bench

    repo, good, git, shas = _two_steps(tmp_path / "repo")
    v = hunt_bench(repo, good, tmp_path / "r.db", "--max-probes", "9")
    head = (
        f"probe budget of 9 exhausted; the bisection had found a step at {shas[7][:10]} (not yet confirmed by an "
        "A/B) and narrowed the 24 commits above it to "
    )
    assert v["status"] == "inconclusive" and v["error"].startswith(head), v["error"]
    lo, hi = re.search(r"\((\w+)\^\.\.(\w+)\)", v["error"]).groups()
    left = git("rev-list", f"{lo}^..{hi}").split()
    assert shas[23] in left and shas[7] not in left  # the second step is in what is left above the first


def test_a_hunts_wall_clock_starts_when_its_process_did_not_after_its_imports():
    """A trial's `--max-wall 20` returned after 22.7 s: the clock began after about 2 s of imports.
    A process that slept a second before importing the hunt command dates its start before that."""
    import subprocess
    import sys

    code = (
        "import time; time.sleep(1.0); t = time.time()\n"
        "from agent.process_start import process_started_at\n"
        "print(t - process_started_at())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert 1.0 <= float(out.stdout) <= 60, out.stdout


def test_the_console_script_dates_its_hunt_from_the_process_start(tiny, tmp_path):
    """The real `sleuth hunt` process: its run starts when the process did, before its imports (a
    second or so), not when the hunt object was made after them."""
    import json
    import sqlite3
    import subprocess
    import time

    from tests.conftest import sleuth_exe

    repo, good = tiny
    db = tmp_path / "r.db"
    launched = time.time()
    proc = subprocess.run(
        [sleuth_exe(), "hunt", "--repo", str(repo), "--good", good, "--bench", "python3 bench.py",
         "--lower-is-better", "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    run = json.loads(proc.stdout)["run_id"]
    with sqlite3.connect(db) as con:
        started = json.loads(con.execute("select input from runs where id = ?", (run,)).fetchone()[0])["started_at"]
        first = con.execute("select min(t) from events where run = ?", (run,)).fetchone()[0]
    assert launched - 1 <= started <= launched + 5  # the process's start (a fork and exec after `launched`)
    assert first - started >= 0.3, first - started  # its imports came after it
