"""A run resumed after its driver died (``transcripts.cassette.Resumption``): what the dead driver
had recorded is served back and not written twice, and the transcript's place a checkpoint keeps
(``Hunt.seq``) still moves past it, so the next resumption starts where this node ended."""

from __future__ import annotations

from agent.runtime import Runtime
from agent.state import Hunt, Target
from transcripts.cassette import Resumption
from transcripts.store import Store


def _node(rt: Runtime, hunt: Hunt, live) -> str:
    """One node of a hunt: a question to the world, then a verdict said."""
    sha = rt.observe(hunt, "git_resolve", {"ref": "HEAD"}, live)
    rt.say(hunt, "verdict", f"h1 supported at {sha}")
    return sha


def _never() -> str:
    raise AssertionError("the world was asked again")


def test_a_node_the_dead_driver_had_finished_ends_its_checkpoint_at_its_last_event(tmp_path):
    store = Store(tmp_path / "r.db")
    store.start_run("r")
    hunt = Hunt(run_id="r", target=Target(repo=str(tmp_path)))
    checkpoint = store.event("r", "note", "the last checkpoint ends here")
    # The first driver finishes the node, then dies before its checkpoint is written.
    first = Runtime(hunt, tmp_path / "run", None, store)
    assert _node(first, hunt, lambda: "abc123") == "abc123"
    finished = first.last_seq
    written = len(store.events("r"))

    # The resumed driver runs the node again from the recording: nothing asked, nothing written...
    again = Runtime(hunt, tmp_path / "run", None, store, cassette=Resumption(store.events("r"), checkpoint))
    assert _node(again, hunt, _never) == "abc123"
    assert len(store.events("r")) == written
    # ...and its checkpoint starts after the node, not at the one before it: a driver killed in the
    # next node resumes that node alone (it was served the finished node's calls as the next one's).
    assert finished is not None and again.last_seq == finished
    nxt = Resumption(store.events("r"), again.last_seq)
    assert nxt.calls == [] and nxt.answer("git_resolve", {"ref": "HEAD~1"}) is None


def test_a_resumption_writes_from_the_first_event_that_differs(tmp_path):
    store = Store(tmp_path / "r.db")
    store.start_run("r")
    hunt = Hunt(run_id="r", target=Target(repo=str(tmp_path)))
    checkpoint = store.event("r", "note", "the last checkpoint ends here")
    _node(Runtime(hunt, tmp_path / "run", None, store), hunt, lambda: "abc123")
    written = len(store.events("r"))

    again = Runtime(hunt, tmp_path / "run", None, store, cassette=Resumption(store.events("r"), checkpoint))
    again.observe(hunt, "git_resolve", {"ref": "HEAD"}, _never)  # served, not written
    again.say(hunt, "verdict", "h1 refuted")  # differs from the recording: written, and so is all after it
    assert [e["text"] for e in store.events("r")[written:]] == ["h1 refuted"]
    assert again.last_seq == store.events("r")[-1]["seq"]
