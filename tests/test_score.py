"""`sleuth score RUN --root-cause REF`: when a session not ours first named the root cause."""

from __future__ import annotations

import json
from pathlib import Path

from evals.score import first_named, pattern
from tests.conftest import sleuth_in_process

SEED = Path(__file__).parents[1] / "transcripts" / "examples" / "seed_session.json"


def sleuth(*args: str):
    return sleuth_in_process(*args)


def test_the_reconstructed_seed_session_names_the_pcg_commit_after_its_git_log(tmp_path):
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(SEED), "--db", str(db), "--json").stdout)["run_id"]
    proc = sleuth("score", run, "--root-cause", "0be30d4b0d5468daf4ea34b01df1e142463a08aa", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    # the git log output (a tool result) lists 0be30d4 first; the agent names it in its next message
    assert res["named"] and res["tool_calls_before"] == 7 and res["tool_calls_total"] == 8
    assert "Fix PCG MoE Error" in res["excerpt"]
    assert res["abandoned"] == []  # a free-text session keeps no ledger to read them from
    proc = sleuth("score", run, "--root-cause", "NCCL_ALGO", "--kind", "env", "--db", str(db), "--json")
    assert json.loads(proc.stdout)["tool_calls_before"] == 1  # the NCCL hypothesis came first


def test_a_root_cause_never_named_exits_1_and_bad_input_exits_2(tmp_path):
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(SEED), "--db", str(db), "--json").stdout)["run_id"]
    proc = sleuth("score", run, "--root-cause", "deadbeefcafe", "--db", str(db))
    assert proc.returncode == 1 and "never named deadbeefcafe" in proc.stdout
    proc = sleuth("score", run, "--root-cause", "abc", "--db", str(db))
    assert proc.returncode == 2 and "--root-cause: a commit needs at least 7 hex digits" in proc.stderr
    proc = sleuth("score", "nope", "--root-cause", "deadbeefcafe", "--db", str(db))
    assert proc.returncode == 2 and "RUN: no run 'nope'" in proc.stderr


def test_a_commit_is_named_by_any_prefix_of_seven_or_more_but_not_inside_a_longer_hex():
    p = pattern("0be30d4b0d5468daf4ea34b01df1e142463a08aa", "commit")
    assert p.search("git show 0be30d4 --stat") and p.search("revert 0be30d4b0d5468")
    assert not p.search("a0be30d4") and not p.search("0be30d")
    events = [
        {"seq": 1, "t": 10.0, "kind": "tool_result", "text": "0be30d4 Fix PCG MoE Error", "payload": "{}"},
        {
            "seq": 2,
            "t": 12.5,
            "kind": "tool_call",
            "text": "bash",
            "payload": json.dumps({"args": {"cmd": "git show 0be30d4"}}),
        },
    ]
    res = first_named("r", events, "0be30d4b0d5468daf4ea34b01df1e142463a08aa")
    assert res.seq == 2 and res.seconds_from_start == 2.5 and res.tool_calls_before == 0


def test_our_own_run_lists_the_hypotheses_it_abandoned():
    events = [{"seq": 1, "t": 0.0, "kind": "note", "text": "culprit 0be30d4b0d", "payload": "{}"}]
    hyps = [
        {"statement": "NCCL_PROTO=LL in the server's environment slows it", "status": "refuted"},
        {"statement": "the uncommitted change to flashinfer_mla_backend.py slows it", "status": "demoted"},
        {"statement": "a commit since bba2fc4 slows it", "status": "supported"},
    ]
    res = first_named("r", events, "0be30d4b0d5468daf4ea34b01df1e142463a08aa", hypotheses=hyps)
    assert res.named and len(res.abandoned) == 2 and res.abandoned[0].startswith("NCCL_PROTO")


def test_a_cause_the_run_named_and_then_refuted_is_said_to_be_refuted():
    """A red herring the run stated, tested and refuted was "named at event #33" and nothing more:
    the first mention of a cause the run itself dropped is no finding."""
    events = [{"seq": 1, "t": 0.0, "kind": "hypothesis", "text": "h1 NCCL_DEBUG=INFO slows it", "payload": "{}"}]
    hyps = [{"statement": "NCCL_DEBUG=INFO in the server's environment slows it", "status": "refuted"}]
    res = first_named("r", events, "NCCL_DEBUG", kind="env", hypotheses=hyps)
    assert res.named and res.refuted == ["NCCL_DEBUG=INFO in the server's environment slows it"]
    assert first_named("r", events, "NCCL_ALGO", kind="env", hypotheses=hyps).refuted == []


def test_the_hypotheses_a_scored_run_abandoned_are_cut_between_words(tmp_path):
    """`score` listed "abandoned (2): NCCL_PROTO=LL in the server's environment slows it; the
    uncommitted change to python/minisglang/layers/attenti": each is now whole, or cut at a word's
    end and marked."""
    from tests.worlds import load

    got = load("approved", tmp_path / "r.db")
    run, truth = got["run"]["id"], got["run"]["truth"]
    proc = sleuth("score", run, "--root-cause", truth["ref"], "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.lstrip().startswith("abandoned ("))
    statements = [h["statement"] for h in got["hypotheses"] if h["status"] in ("refuted", "demoted")]
    items = line.split("): ", 1)[1].split("; ")
    cut = [x for x in items if x not in statements]
    assert cut and all(x.endswith(" …") for x in cut), items
    for x in cut:  # a statement's words, the last one whole
        whole = next(s for s in statements if s.startswith(x[:-2]))
        assert whole[len(x) - 2] == " ", (x, whole)
