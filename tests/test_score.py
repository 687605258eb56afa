"""`sleuth score RUN --root-cause REF`: when a session not ours first named the root cause."""

from __future__ import annotations

import json
from pathlib import Path

from evals.score import conclusion_of, find, first_named
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
    assert res["concluded"]  # its last message names the commit: found
    proc = sleuth("score", run, "--root-cause", "NCCL_ALGO", "--kind", "env", "--db", str(db), "--json")
    res = json.loads(proc.stdout)
    assert res["tool_calls_before"] == 1  # the NCCL hypothesis came first...
    assert proc.returncode == 1 and not res["concluded"]  # ...and it is not what the session concluded
    text = sleuth("score", run, "--root-cause", "NCCL_ALGO", "--kind", "env", "--db", str(db)).stdout
    assert "its conclusion does not name it: " in text, text


def test_a_root_cause_never_named_exits_1_and_bad_input_exits_2(tmp_path):
    db = tmp_path / "r.db"
    run = json.loads(sleuth("import", str(SEED), "--db", str(db), "--json").stdout)["run_id"]
    proc = sleuth("score", run, "--root-cause", "deadbeefcafe", "--db", str(db))
    assert proc.returncode == 1 and "never named deadbeefcafe" in proc.stdout
    for wrong, kind in (("abc", "commit"), ("zzzzzzzz", "commit"), ("NCCL_ALGO", "commit"), ("no-dash", "config")):
        proc = sleuth("score", run, "--root-cause", wrong, "--kind", kind, "--db", str(db))
        assert proc.returncode == 2 and proc.stderr.startswith("error: --root-cause: "), (wrong, proc.stderr)
    assert (
        "a commit is 7 to 40 hex digits, not 'zzzzzzzz'"
        in sleuth("score", run, "--root-cause", "zzzzzzzz", "--db", str(db)).stderr
    )
    proc = sleuth("score", "nope", "--root-cause", "deadbeefcafe", "--db", str(db))
    assert proc.returncode == 2 and "RUN: no run 'nope'" in proc.stderr


def test_a_commit_is_named_by_any_prefix_of_seven_or_more_but_not_inside_a_longer_hex():
    sha = "0be30d4b0d5468daf4ea34b01df1e142463a08aa"
    assert find(sha, "commit", "git show 0be30d4 --stat") and find(sha, "commit", "revert 0be30d4b0d5468")
    assert not find(sha, "commit", "a0be30d4") and not find(sha, "commit", "0be30d")
    assert not find(sha, "commit", "0be30d4ffff")  # seven digits alike, then another commit
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


def test_a_path_variable_or_flag_is_named_only_as_a_whole_name():
    """A trial's scores: `--root-cause colon` was "named" by missing_colon.py, `md` and `tests`
    by any path holding them, and src/unrelated/missing_colon.py by another folder's file."""
    path = "src/unrelated/missing_colon.py"
    for text in (
        "the bug is in src/unrelated/missing_colon.py",
        "edit ./src/unrelated/missing_colon.py",
        "--- a/src/unrelated/missing_colon.py",
        "/home/me/repo/src/unrelated/missing_colon.py:12: SyntaxError",
        "the culprit is missing_colon.py",  # the file name alone: how an agent names a file
        "see unrelated/missing_colon.py",
    ):
        assert find(path, "uncommitted", text), text
    for text in ("src/other/missing_colon.py", "missing_colon.pyc", "my_missing_colon.py", "colon"):
        assert not find(path, "uncommitted", text), text
    assert not find("colon", "uncommitted", "the culprit is missing_colon.py")
    assert not find("md", "uncommitted", "README.md") and find("README.md", "uncommitted", "edit README.md")
    assert find("NCCL_ALGO", "env", "export NCCL_ALGO=Ring") and not find("NCCL_ALGO", "env", "NCCL_ALGO_X=1")
    assert not find("NCCL_ALGO", "env", "MY_NCCL_ALGO=1")
    flag = "--disable-cuda-graph"
    assert find(flag, "config", f"python -m sglang {flag} --tp 2")
    assert not find(flag, "config", f"{flag}-padding")


def test_a_cause_our_run_named_and_then_dismissed_is_not_what_it_concluded():
    """A trial scored one of our runs against a red-herring commit it had pruned: "named at event
    #84", exit 0. Its verdict names another commit: exit 1 now."""
    run = {
        "kind": "hunt",
        "verdict": json.dumps({"root_causes": [{"ref": "68d336a592aa", "summary": "draft step 3x slower"}]}),
    }
    events = [{"seq": 84, "t": 1.0, "kind": "note", "text": "852732cc54 touches only Python imported at neither end"}]
    herring = first_named("r", events, "852732cc544a08", "commit", conclusion=conclusion_of(run, events))
    assert herring.named and not herring.concluded
    culprit = first_named("r", events, "68d336a592aa", "commit", conclusion=conclusion_of(run, events))
    assert culprit.concluded and not culprit.named  # our verdict names what the events never did
