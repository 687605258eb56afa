"""Recorded worlds: hunts recorded once live and served back to the agent in the tests.

A logic test (what the policy decides, how a bisection goes on, what the report says) needs the
world's answers, not the world: each world here builds a small real repository, hunts it live
once, and keeps the run (``transcripts.recording``: one JSON object per line) in
``tests/recordings/NAME.jsonl``. ``tests/test_recorded.py`` replays each strictly (every answer
from the recording: no repository, no benchmark, no sleep; the same verdict every time) and checks
its verdict. When the agent's logic changes, a replay diverges and the test says which recording
and which step; re-record, and review the diff like code:

    .venv/bin/python -m tests.worlds                 # every world
    .venv/bin/python -m tests.worlds reland noisy    # some

The live versions of these hunts stay in the slow step (``tests/test_reland.py`` and friends
marked ``slow``) so the live path is still exercised, where load cannot fail a default run.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import hunt_bench, sleuth_in_process
from transcripts.recording import export_run, write_lines
from transcripts.store import Store

RECORDINGS = Path(__file__).resolve().parent / "recordings"


@dataclass(frozen=True)
class World:
    """``hunt(tmp, db)`` builds the world in ``tmp``, hunts it live into the store ``db`` and
    returns ``(verdict, truth)``: the truth is the root cause its maker knows (``kind`` and, where
    one thing is named, ``ref``), recorded beside the run as a scorer's truth. ``check`` says more
    about a verdict (the recorded one in the default run, a live one in the slow step)."""

    hunt: Callable[[Path, Path], tuple[dict, dict]]
    doc: str
    check: Callable[[dict], None] = lambda verdict: None
    # What the live hunt must show where ``check`` reads where a budget cut it, which noise moves
    # (a probe more or fewer under load): None, the same as ``check``.
    live_check: Callable[[dict], None] | None = None


def _bench(
    make: Callable[[Path], tuple[Path, str, str]], *extra: str, stopped: bool = False
) -> Callable[[Path, Path], tuple[dict, dict]]:
    """A world of a small benchmark-command repository: ``make(tmp)`` gives (repo, good, the slow
    commit at HEAD), hunted with the options ``extra``. ``stopped``: they stop the hunt before it
    names anything, and its truth is that stop (``inconclusive``)."""

    def hunt(tmp: Path, db: Path) -> tuple[dict, dict]:
        repo, good, truth = make(tmp)
        verdict = hunt_bench(repo, good, db, *extra)
        return verdict, {"kind": "inconclusive"} if stopped else {"kind": "commit", "ref": truth}

    return hunt


def _lab(
    spec_text: Callable[[], str], truth_of: Callable[[dict], dict], exit_code: int = 0
) -> Callable[[Path, Path], tuple[dict, dict]]:
    """A lab scenario hunted from its alert, the user's checkout fingerprinted before and after
    (a hunt never touches it). ``truth_of(truth.json)`` is the root cause to name; ``exit_code``
    the hunt's (1 where nothing is there to approve, an external cause)."""

    def hunt(tmp: Path, db: Path) -> tuple[dict, dict]:
        from evals.lab.builder import build
        from evals.lab.spec import load_spec
        from tests.test_git_tools import fingerprint

        (tmp / "s.toml").write_text(spec_text())
        res = build(load_spec(tmp / "s.toml"), tmp / "scenario")
        before = fingerprint(res.repo)
        proc = sleuth_in_process("hunt", "--alert", str(res.root / "alert.json"), "--db", str(db), "--json")
        assert proc.returncode == exit_code, proc.stdout[-3000:]
        assert fingerprint(res.repo) == before, "the hunt touched the user's checkout"
        return json.loads(proc.stdout), truth_of(json.loads((res.root / "truth.json").read_text()))

    return hunt


def _reland(tmp: Path) -> tuple[Path, str, str]:
    from tests.test_reland import _commit, _repo, _revert, _touch

    repo, git = _repo(tmp)
    good = git("rev-parse", "HEAD")
    first = _commit(repo, git, "COST = 2.0  # first landing\n", "Cache nothing")
    _touch(repo, git, 4, "tidy")
    _revert(git, first)
    reland = _commit(repo, git, "COST = 2.0  # reworked\n", "Reland: cache nothing")
    _touch(repo, git, 2, "docs")
    return repo, good, reland


def _silent_reland(tmp: Path) -> tuple[Path, str, str]:
    """A slow change taken back out by a commit that says nothing of it (a README update that
    also restored the old line), then re-landed: no message names the undo."""
    from tests.test_reland import _commit, _repo, _touch

    repo, git = _repo(tmp)
    good = git("rev-parse", "HEAD")
    _commit(repo, git, "COST = 2.0  # walk the tree twice\n", "Fix get_real_name for quoted names")
    _touch(repo, git, 8, "tidy")  # the bisection's first probe lands in the first slow stretch
    (repo / "README.md").write_text("Updated.\n")
    git("add", "README.md")
    _commit(repo, git, "COST = 1.0\n", "Update README.")
    _touch(repo, git, 1, "docs")
    reland = _commit(repo, git, "COST = 2.0  # walk the tree twice\n", "Fix ReDoS in the tokenizer")
    _touch(repo, git, 1, "more")
    return repo, good, reland


def _env_outside_prefixes(tmp: Path, db: Path) -> tuple[dict, dict]:
    """The benchmark runs 1.6x slower when ``MYLIB_DEBUG=1``, a program's own switch no tuning
    prefix names; it is set for the hunt, and the alert's good value (1.0) was taken without it.
    No commit changes the speed (the known-good commit measures like HEAD)."""
    import os

    from tests.conftest import bench_repo

    bench = (
        "import os, random, lib\n"
        "slow = 1.6 if os.environ.get('MYLIB_DEBUG') == '1' else 1.0\n"
        "print(lib.COST * slow * random.gauss(1, 0.005))\n"
    )
    repo, git, good = bench_repo(tmp / "proj", bench)
    for i in range(6):
        (repo / f"notes{i}.txt").write_text(f"{i}\n")
        git("add", ".")
        git("commit", "-qm", f"notes {i}")
    before = os.environ.get("MYLIB_DEBUG")
    os.environ["MYLIB_DEBUG"] = "1"
    try:
        verdict = hunt_bench(repo, good, db, "--good-value", "1.0")
    finally:
        if before is None:
            os.environ.pop("MYLIB_DEBUG", None)
        else:
            os.environ["MYLIB_DEBUG"] = before
    return verdict, {"kind": "env", "ref": "MYLIB_DEBUG"}


def _unset_proposed(verdict: dict) -> None:
    assert verdict["proposed_action"]["kind"] == "unset" and verdict["proposed_action"]["ref"] == "MYLIB_DEBUG"
    group = next(h for h in verdict["hypotheses"] if h["statement"].startswith("a variable in"))
    assert group["status"] == "supported" and "beyond the tuning prefixes" in group["statement"]


def _fix_reverted(tmp: Path) -> tuple[Path, str, str]:
    from tests.test_reland import _commit, _repo, _revert, _touch

    repo, git = _repo(tmp)
    good = git("rev-parse", "HEAD")
    slow = _commit(repo, git, "COST = 2.0\n", "Check the weights every step")
    _touch(repo, git, 8, "tidy")
    fix = _revert(git, slow)
    unfix = _revert(git, fix)
    _touch(repo, git, 2, "docs")
    return repo, good, unfix


def _noisy(tmp: Path) -> tuple[Path, str, str]:
    from tests.test_bench_mode import _noisy_repo

    return _noisy_repo(tmp)


def _undone_once(verdict: dict) -> None:
    assert len(verdict["undone"]) == 1 and verdict["undone"][0]["reverted_by"], verdict["undone"]
    assert "landed such a step earlier, undone by" in verdict["summary"]


def _decided_without_launches(verdict: dict) -> None:
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    assert history["status"] == "supported" and verdict["cost"]["launches"] == 0, history["reason"]


def _confirmation_fails(tmp: Path, db: Path) -> tuple[dict, dict]:
    """One probe lies (a noisy neighbour, say): the first bisection names an innocent docs commit,
    its revert recovers nothing, and the second bisection, verifying each culprit against its
    parent with fresh samples, finds the real one, which then passes its confirmation."""
    from tests.conftest import bench_repo
    from tests.test_agent import LYING_BENCH
    from tests.test_git_tools import fingerprint

    repo, git, _ = bench_repo(tmp / "lib")  # its own bench.py unused: the lying one lives outside
    for i in range(1, 25):
        (repo / f"note{i}.md").write_text(f"note {i}\n")  # one file each: a revert never conflicts
        git("add", ".")
        if i == 20:
            (repo / "lib.py").write_text("COST = 2.0\n")
            git("commit", "-qam", "Recompute the table on every call")
        else:
            git("commit", "-qm", f"docs: note {i}")
    culprit = git("rev-parse", "HEAD~4")
    (tmp / "bench.py").write_text(LYING_BENCH)
    bench = f"python3 {tmp / 'bench.py'} {tmp / 'lies.json'}"
    before = fingerprint(repo)
    # Without code-path pruning: the docs commits would never be probed, so no probe could lie.
    proc = sleuth_in_process(
        "hunt", "--repo", repo, "--good", "HEAD~24", "--bench", bench, "--lower-is-better", "--db", db,
        "--no-trace-paths", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert json.loads((tmp / "lies.json").read_text())["lies"] >= 3  # the lie was told and heard
    assert fingerprint(repo) == before
    return json.loads(proc.stdout), {"kind": "commit", "ref": culprit}


def _bisected_again(verdict: dict) -> None:
    assert verdict["status"] == "awaiting_approval"
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    assert "not confirmed" in history["reason"], history["reason"]  # the first culprit, before the second bisection


def _patch_spec() -> str:
    from tests.test_agent import PATCH_SPEC

    return textwrap.dedent(PATCH_SPEC)


def _commit_and_patch_spec() -> str:
    from tests.test_multiple import quiet_spec

    return quiet_spec()


def _one_patch_localized(verdict: dict) -> None:
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    # The known-good commit measures like HEAD (refuted); under a loaded machine's noise its A/B may
    # stay unknown through every round, which leaves it inconclusive, never supported.
    assert history["status"] in ("refuted", "inconclusive") and history["reason"], history
    others = [h for h in verdict["hypotheses"] if h["category"] == "uncommitted" and "topk" not in h["statement"]]
    assert len(others) == 3 and all(h["status"] == "refuted" and "localization" in h["reason"] for h in others)
    assert verdict["proposed_action"]["kind"] == "restore" and verdict["proposed_action"]["status"] == "pending"


def _both_named_and_fixed(verdict: dict) -> None:
    causes = {c["kind"]: c for c in verdict["root_causes"]}
    assert set(causes) == {"commit", "uncommitted"}
    assert causes["uncommitted"]["ref"].endswith("layers/moe/topk.py")
    # Each one's own A/B recovers a part of the drop. (The drop is the alert's good value against
    # the reproduction: a loaded machine moves that denominator, so the shares, about half each on
    # a quiet one, are only held to "some, and not both all of it"; under CI's load the commit's
    # came out at or above 100 % once, the patch's at 21 %.)
    shares = sorted(c["share_pct"] for c in causes.values())
    assert shares[0] > 0 and shares[0] < 100, causes
    action = verdict["proposed_action"]
    assert action["kind"] == "revert" and action["ref"] == causes["commit"]["ref"]  # the step it can land, first
    assert "then discard the uncommitted change to python/minisglang/layers/moe/topk.py" in action["detail"]


def _commit_and_patch_truth(truth: dict) -> dict:
    commit = next(c["ref"] for c in truth["root_causes"] if c["kind"] == "commit")
    return {"kind": "multiple", "refs": [commit, "python/minisglang/layers/moe/topk.py"]}


def _small_spec() -> str:
    """The small scenario of ``tests/test_agent.py`` with a culprit three times as strong (120 us):
    this world is about replay and export, not sensitivity."""
    from tests.test_agent import SMALL

    assert SMALL.count("add_us = 40") == 1
    return textwrap.dedent(SMALL.replace("add_us = 40", "add_us = 120"))


def _the_commit(truth: dict) -> dict:
    return {"kind": "commit", "ref": truth["root_causes"][0]["ref"]}


def _approved(tmp: Path, db: Path) -> tuple[dict, dict]:
    """The small scenario hunted from its alert, then approved in a second process: the recording
    holds the whole story, the approval, the revert landed on a branch and its re-measure."""
    verdict, truth = _lab(_small_spec, _the_commit)(tmp, db)
    proc = sleuth_in_process("approve", verdict["run_id"], "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return _verdict_of(verdict["run_id"], db), truth


def _verdict_of(run: str, db: Path) -> dict:
    """The run's verdict as the store holds it now (``sleuth show RUN --json``)."""
    proc = sleuth_in_process("show", run, "--json", "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)["run"]["verdict"]


def _revert_landed_and_recovered(verdict: dict) -> None:
    action = verdict["proposed_action"]
    assert verdict["status"] == "concluded" and action["kind"] == "revert" and action["status"] == "applied", action
    assert verdict["after"]["measurement"] and verdict["after"]["recovered_pct_of_drop"] > 50, verdict["after"]


def _bisect_only(tmp: Path, db: Path) -> tuple[dict, dict]:
    """The small scenario hunted by the bisect-only policy, with the scenario's spec stored beside
    the run: a replay under another policy rebuilds the world from it and asks it live."""
    from agent.graph import Hunter
    from agent.hunt_cmd import target_from_alert
    from agent.state import Budget, Hunt, new_run_id
    from evals.lab.builder import build
    from evals.lab.spec import load_spec

    spec = tmp / "small.toml"
    spec.write_text(_small_spec())
    res = build(load_spec(spec), tmp / "scenario")
    hunt = Hunt(
        run_id=new_run_id(),
        policy="bisect-only",
        target=target_from_alert(res.root / "alert.json", None),
        budget=Budget(max_probes=12),
    )
    hunter = Hunter(db, tmp / "runs")
    try:
        hunter.start(hunt, scenario=str(res.root), spec=spec.read_text())
    finally:
        hunter.close()
    return _verdict_of(hunt.run_id, db), _the_commit(json.loads((res.root / "truth.json").read_text()))


def _history_alone(verdict: dict) -> None:
    assert [h["category"] for h in verdict["hypotheses"]] == ["history"], verdict["hypotheses"]


MASKED_BENCH = "python3 -c 'import random, lib; print(lib.cost() * random.gauss(1, 0.01))'"


def _masked(hidden: bool, good_value: str, *extra: str) -> Callable[[Path, Path], tuple[dict, dict]]:
    """``tests/test_agent._masked_repo`` hunted from HEAD~10 with the alert's good value: A (the
    safe path) at commit 3 and, when ``hidden``, B (a slower fast path) at commit 7, invisible
    at HEAD until A is reverted. The truth: A and B, or A alone (no B, or ``extra`` options
    that stop the hunt before it can look for B)."""

    def hunt(tmp: Path, db: Path) -> tuple[dict, dict]:
        from tests.test_agent import _masked_repo
        from tests.test_git_tools import fingerprint

        repo, first, later = _masked_repo(tmp, hidden=hidden)
        before = fingerprint(repo)
        proc = sleuth_in_process(
            "hunt", "--repo", repo, "--good", "HEAD~10", "--bench", MASKED_BENCH, "--lower-is-better",
            "--good-value", good_value, *extra, "--db", db, "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-6000:]
        assert fingerprint(repo) == before, "the hunt touched the user's checkout"
        both = hidden and not extra
        truth = {"kind": "multiple", "refs": [first, later]} if both else {"kind": "commit", "ref": first}
        return json.loads(proc.stdout), truth

    return hunt


def _rest_found(verdict: dict) -> None:
    # The first bisection sees one step (A); A's revert gives back about 40 % of the drop; HEAD
    # with A reverted is still slower than the known-good commit, so the range is bisected again
    # with A reverted in every probe that holds it, and B shows.
    causes = {("A" if "Use the safe path" in c["summary"] else "B"): c for c in verdict["root_causes"]}
    assert 25 < causes["A"]["share_pct"] < 60 and 40 < causes["B"]["share_pct"] < 75, causes
    assert "Simplify the fast path" in causes["B"]["summary"]
    # The state that confirmed B (HEAD with A, then B, reverted) is the proposal: one branch, both.
    action = verdict["proposed_action"]
    branch = f"sleuth/revert-{causes['A']['ref'][:10]}-{causes['B']['ref'][:10]}"
    assert (action["kind"], action["branch"]) == ("revert", branch), action
    assert causes["B"]["action"] == f"reverted in the chain on branch {branch}"


def _rest_outside(verdict: dict) -> None:
    # The alert's good value is 0.8 s: the revert recovers 0.6 of the 0.8 s drop (75 %), and HEAD
    # with it reverted measures like the known-good commit: the rest is not in the history.
    assert 60 < verdict["regression"]["explained_pct"] < 80, verdict["regression"]
    assert verdict["regression"]["residual"]["in_history"] is False
    assert "the rest is not in the history" in verdict["root_cause"]["summary"]
    assert "outside the repository" in verdict["root_cause"]["summary"]


def _stopped_by(verdict: dict, budget: str) -> None:
    """Live, where a probe more or fewer moves the stop: the budget is said, and no step found
    undone is a culprit."""
    assert verdict["status"] == "inconclusive" and budget in verdict["summary"], verdict["summary"]
    assert not {u["sha"] for u in verdict["undone"]} & set(verdict["culprits"]), verdict["culprits"]


def _undone_and_stopped(verdict: dict) -> None:
    """A toolz trial's budget stop past an undone step named that step in ``culprits`` and listed it
    twice in ``undone``: it is history, in ``undone`` once, and the summary names the budget."""
    assert verdict["status"] == "inconclusive" and "probe budget of 6 exhausted" in verdict["summary"]
    (undone,) = verdict["undone"]
    assert undone["subject"] == "Cache nothing" and verdict["culprits"] == [], (verdict["undone"], verdict["culprits"])


def _narrowed_to_an_undone_step(verdict: dict) -> None:
    """A budget stop named the range its search had narrowed to, around a step a later commit
    undid: read alone, it pointed away from the cause at HEAD."""
    summary = verdict["summary"]
    assert verdict["status"] == "inconclusive" and "probe budget of 4 exhausted; the bisection had narrowed" in summary
    assert "was reverted later by" in summary and "may be a later re-land, outside this range" in summary, summary


def _rest_cut_by_budget(verdict: dict) -> None:
    assert verdict["status"] == "awaiting_approval"  # the search for the rest ended, not the hunt
    stop = "the search for the rest of the drop stopped: probe budget of 4 exhausted"
    assert stop in verdict["root_cause"]["summary"], verdict["root_cause"]["summary"]
    assert verdict["proposed_action"]["kind"] == "revert"


def _partial_revert(tmp: Path) -> tuple[Path, str, str]:
    """A commit says it reverts the slow one but undoes nothing of its cost (a partial revert)."""
    from tests.test_reland import _commit, _repo, _touch

    repo, git = _repo(tmp)
    good = git("rev-parse", "HEAD")
    slow = _commit(repo, git, "COST = 2.0\n", "slower")
    _touch(repo, git, 2, "tidy")
    (repo / "notes.txt").write_text("reverted the logging part only\n")
    git("add", "notes.txt")
    git("commit", "-qm", 'Revert "slower" (partly)', "-m", f"This reverts commit {slow}.")
    _touch(repo, git, 2, "docs")
    return repo, good, slow


def _still_standing(verdict: dict) -> None:
    assert verdict["undone"] == [], verdict["summary"]
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    assert "reverts it, but does not measure better than HEAD" in history["reason"]


def _mostly_given_back(tmp: Path) -> tuple[Path, str, str]:
    """Not a revert: a later commit takes most of the step back (mlx-lm's #674 took #626's 2.8x
    TTFT to +8 %): 1.0 -> 3.0 -> 1.3."""
    from tests.test_reland import _commit, _repo, _touch

    repo, git = _repo(tmp)
    good = git("rev-parse", "HEAD")
    _touch(repo, git, 1, "tidy")
    slow = _commit(repo, git, "COST = 3.0\n", "Batch every request")
    _touch(repo, git, 2, "more")
    _commit(repo, git, "COST = 1.3\n", "Poll less often")  # gives back most of it, not a revert
    _touch(repo, git, 1, "docs")
    return repo, good, slow


def _left_at_head(verdict: dict) -> None:
    # The first bad commit is still the culprit, but the summary says its step is several times
    # what is left at HEAD, so nobody reverts it expecting the step back.
    summary = verdict["summary"]
    assert verdict["undone"] == [], summary
    assert "what is left at HEAD" in summary and "later commits gave back" in summary, summary
    back = int(summary.split("later commits gave back ")[1].split("%")[0])
    assert 75 <= back <= 95, summary  # (3.0 - 1.3) / (3.0 - 1.0): 85 %, give or take the noise


CORE = Path(__file__).resolve().parents[1] / "evals" / "suites" / "core"


def _uneven_steps_spec() -> str:
    return (CORE / "uneven_steps.toml").read_text()


def _staircase_spec() -> str:
    return (CORE / "two_culprits.toml").read_text()


def _external_spec() -> str:
    """The small scenario with no slow commit (its pulled change edits four lines of code), on a
    host 1.6x slower than when the alert's good value (94) was taken: the known-good commit
    measures like HEAD, and the drop is far beyond the alert number's noise (within two sample
    sds only at a 30 % sample CV, which no load seen here reached; 1.35x was undone once by a
    17 % CV under a loaded CI)."""
    from tests.conftest import MINIMAL_SPEC

    text = MINIMAL_SPEC.replace('effect = { cost = "allreduce_eager", add_us = 50 }', "lines = 4")
    text = text.replace('[truth]\nculprits = ["slow"]', '[truth]\nkind = "external"')
    alert = "[system]\nslowdown = 1.6\n[alert]\ngood = 94\nbad = 59\ngive_good_ref = true\nrequests = 2"
    return text.replace("[alert]\ngood = 94\nbad = 70", alert)


def _outside_the_repository(verdict: dict) -> None:
    """No false ``none``: a drop nothing in the repository explains ends ``external``, naming what
    was measured and what is left to look at, with nothing to approve."""
    why = [(h["category"], h["status"], h["reason"][:300]) for h in verdict["hypotheses"]]
    assert verdict["status"] == "concluded" and verdict["root_cause"]["kind"] == "external", why
    summary = verdict["root_cause"]["summary"]
    assert "the known-good commit measures like HEAD" in summary and "vs the alert's good 94" in summary
    assert "installed packages" in summary
    assert "no package changed since pip's log" in summary  # the operator's log records nothing
    assert verdict["regression"]["delta_pct"] < -3, verdict["regression"]
    assert verdict["proposed_action"]["kind"] == "investigate"


def _topk_patch_spec() -> str:
    return (CORE.parent / "seed" / "eagle3_topk_patch.toml").read_text()


def _the_patch(truth: dict) -> dict:
    return {"kind": "uncommitted", "ref": truth["root_causes"][0]["ref"]}


def _history_left_untested(verdict: dict) -> None:
    # The seed's patch scenario on its one-slot host: clean HEAD (every variable blanked, no patch)
    # gives the whole drop back to the alert's good value, so the known-good commit is never
    # launched and the history is left untested, saying why (one launch and 8 samples fewer; the
    # recording holds that, tests/test_recorded.py). Live under load the lab's levels move against
    # the alert's fixed 94 tok/s: where clean HEAD's first block gives back less than 80 % of the
    # drop, the history is measured, and refuted (or undecided), never supported.
    history = next(h for h in verdict["hypotheses"] if h["category"] == "history")
    if history["status"] == "open":
        assert history["reason"].startswith("not tested: clean HEAD gives back"), history["reason"]
        assert "the known-good commit was not launched" in history["reason"], history["reason"]
    else:
        assert history["status"] in ("refuted", "inconclusive"), history
    assert verdict["root_cause"]["ref"].endswith("layers/moe/topk.py")
    # The variables change nothing (refuted; under a loaded machine's noise an A/B may stay
    # undecided through every round, which leaves one inconclusive, never supported).
    env = [h for h in verdict["hypotheses"] if h["category"] == "environment"]
    assert len(env) == 3 and all(h["status"] in ("refuted", "inconclusive") for h in env), env


def _every_culprit(truth: dict) -> dict:
    return {"kind": "multiple", "refs": [c["ref"] for c in truth["root_causes"]]}


def _each_step_with_its_share(verdict: dict) -> None:
    # Both steps of one range, each confirmed by its own revert, each with its share; not the first
    # alone with "the rest is not explained" and a second bisection that ran out of probes.
    causes = verdict["root_causes"]
    assert [c["kind"] for c in causes] == ["commit", "commit"], causes
    assert all(0 < c["share_pct"] < 100 for c in causes), causes  # about 60/40 (uneven), 65/35 (staircase)
    assert "residual" not in verdict["regression"] and "stopped" not in verdict["summary"], verdict["summary"]
    # One branch with both reverts (a prepared chain), not the first alone and "then revert" in words.
    action = verdict["proposed_action"]
    assert action["kind"] == "revert" and action["ref"] == causes[0]["ref"]
    assert f"revert {causes[0]['ref']} and {causes[1]['ref']}" in action["detail"], action["detail"]
    assert action["branch"] == f"sleuth/revert-{causes[0]['ref'][:10]}-{causes[1]['ref'][:10]}", action


WORLDS: dict[str, World] = {
    "reland": World(
        _bench(_reland), "a slow change landed, reverted, re-landed reworked: the re-land is named", _undone_once
    ),
    "reland_budget": World(
        _bench(_reland, "--max-probes", "6", stopped=True),
        "the re-land world with 6 probes: the undone first landing is found, then the budget stops the search "
        "past its revert; the undone step is history, never a culprit",
        _undone_and_stopped,
        live_check=lambda v: _stopped_by(v, "probe budget of 6 exhausted"),
    ),
    "reland_narrowed": World(
        _bench(_reland, "--max-probes", "4", stopped=True),
        "the re-land world with 4 probes: the first search stops narrowed around the first landing, and the "
        "stop says that commit was reverted later (the cause at HEAD may lie outside the range)",
        _narrowed_to_an_undone_step,
        live_check=lambda v: _stopped_by(v, "probe budget of 4 exhausted"),
    ),
    "silent_reland": World(
        _bench(_silent_reland),
        "a slow change taken back out by a README update that does not say so, then re-landed: the re-land is named",
        _undone_once,
    ),
    "env_outside_prefixes": World(
        _env_outside_prefixes,
        "a program's own switch (MYLIB_DEBUG=1) no tuning prefix names, and no commit: the rest of the "
        "environment blanked gives the speed back, and halving names the variable",
        _unset_proposed,
    ),
    "fix_reverted": World(
        _bench(_fix_reverted), "a slow commit, its revert, the revert reverted: the last is named", _undone_once
    ),
    "noisy": World(
        _bench(_noisy),
        "a 1.2x step under +-25 % noise per sample: the A/B keeps sampling until decided",
        _decided_without_launches,
    ),
    "confirmation_fails": World(
        _confirmation_fails,
        "a probe lies, the first culprit fails its confirmation, a verified second bisection finds the real one",
        _bisected_again,
    ),
    "uncommitted_patch": World(
        _lab(_patch_spec, lambda truth: {"kind": "uncommitted", "ref": truth["root_causes"][0]["ref"]}),
        "four uncommitted patches, one slow: halving localizes it, the other three refuted, a restore proposed",
        _one_patch_localized,
    ),
    "commit_and_patch": World(
        _lab(_commit_and_patch_spec, _commit_and_patch_truth),
        "a slow commit and a slow patch in one drop: both named with their shares, both in the proposal",
        _both_named_and_fixed,
    ),
    "uneven_steps": World(
        _lab(_uneven_steps_spec, _every_culprit),
        "two commits far apart share the drop about 60/40: both named from one bisection, each with its share",
        _each_step_with_its_share,
    ),
    "rest_hidden": World(
        _masked(True, "1.0"),
        "a culprit whose revert recovers 40 %: the range bisected again with it reverted finds the one it hid",
        _rest_found,
    ),
    "rest_outside": World(
        _masked(False, "0.8"),
        "a culprit that recovers 75 % and a history that holds no more: the rest is outside the repository",
        _rest_outside,
    ),
    "rest_budget": World(
        _masked(True, "1.0", "--max-probes", "4"),
        "the search for the rest runs out of probes: the confirmed culprit is kept and the stop said",
        _rest_cut_by_budget,
    ),
    "partial_revert": World(
        _bench(_partial_revert),
        "a commit that says it reverts the slow one but measures no better: the slow one still stands",
        _still_standing,
    ),
    "mostly_given_back": World(
        _bench(_mostly_given_back),
        "a later commit gives most of the step back (not a revert): named with what is left at HEAD",
        _left_at_head,
    ),
    "approved": World(
        _approved,
        "the small scenario hunted and approved in a second process: the revert landed and re-measured "
        "(tests/test_replay.py replays and exports it)",
        _revert_landed_and_recovered,
    ),
    "bisect_only": World(
        _bisect_only,
        "the small scenario hunted by the bisect-only policy, its spec stored: another policy replays "
        "against the world rebuilt from it (tests/test_replay.py)",
        _history_alone,
    ),
    "external": World(
        _lab(_external_spec, lambda truth: {"kind": "external"}, exit_code=1),
        "a host 1.6x slower than when the alert's good value was taken, nothing changed in the code, the "
        "readings or the packages: the drop is real and external, not none",
        _outside_the_repository,
    ),
    "topk_patch": World(
        _lab(_topk_patch_spec, _the_patch),
        "the seed's patch scenario: clean HEAD gives the whole drop back, so the known-good commit is never "
        "launched and the history is left untested with the reason",
        _history_left_untested,
    ),
    "staircase": World(
        _lab(_staircase_spec, _every_culprit),
        "a staircase, two steps seven commits apart (about 65/35): both named from one bisection, each with its share",
        _each_step_with_its_share,
    ),
}


def matches(truth: dict, root_cause: dict | None, verdict: dict) -> bool:
    """Does a root cause (``{kind, ref}``: a verdict's, or a replay's) name the truth? A truth of
    several causes (``refs``) is matched against the verdict's ``root_causes``; a truth
    ``inconclusive`` (a world whose options stop the hunt) by a verdict that names nothing."""
    if truth["kind"] == "inconclusive":
        return root_cause is None and verdict.get("status") == "inconclusive"
    if not root_cause or root_cause.get("kind") != truth["kind"]:
        return False
    if "refs" in truth:
        return sorted(c["ref"] for c in verdict.get("root_causes") or []) == sorted(truth["refs"])
    return (root_cause.get("ref") or None) == truth.get("ref")


def load(name: str, db: Path) -> dict:
    """The recording of world ``name`` imported into the store ``db`` (nothing of its world is
    left: no repository, host or server); the recording as read."""
    from transcripts.recording import read_lines

    path = RECORDINGS / f"{name}.jsonl"
    assert path.exists(), f"no recording of world '{name}': run `python -m tests.worlds {name}`"
    return imported(read_lines(path), db)


def imported(got: dict, db: Path) -> dict:
    """A recording as read (``read_lines``; a test may have edited it) imported into ``db``."""
    from transcripts.recording import import_run

    store = Store(db)
    try:
        import_run(store, got)
    finally:
        store.close()
    return got


def record(name: str) -> Path:
    """Hunt the world live once and write its recording (with the truth the test checks)."""
    with tempfile.TemporaryDirectory(prefix=f"world-{name}-") as tmp:
        db = Path(tmp) / "r.db"
        verdict, truth = WORLDS[name].hunt(Path(tmp), db)
        assert matches(truth, verdict.get("root_cause"), verdict), (truth, verdict.get("root_cause"))
        WORLDS[name].check(verdict)
        store = Store(db)
        try:
            got = export_run(store, verdict["run_id"])
        finally:
            store.close()
    got["run"]["truth"] = truth  # what the world's maker knows is slow at HEAD
    RECORDINGS.mkdir(exist_ok=True)
    path = RECORDINGS / f"{name}.jsonl"
    write_lines(path, got)
    return path


def main(names: list[str]) -> int:
    for name in names or list(WORLDS):
        if name not in WORLDS:
            print(f"error: no world '{name}' (known: {', '.join(WORLDS)})", file=sys.stderr)
            return 2
        path = record(name)
        print(f"{name}: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path} "
              f"({path.stat().st_size // 1024} KiB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
