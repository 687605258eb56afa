"""Signals around a command's end: a hunt's work unwinds on SIGTERM, and a finished one writes its
report and verdict whatever signal comes after."""

from __future__ import annotations

import os
import signal

import pytest

from agent.hunt_cmd import graceful_signals, report_written, shielded_cleanup


@pytest.fixture
def handlers():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield before
    for sig, handler in before.items():
        signal.signal(sig, handler)


def test_a_sigterm_after_the_work_finished_is_held_until_the_report_is_written(handlers):
    """A trial's SIGTERM two seconds after "proposed: ..." ended the hunt with 143, nothing printed
    and no verdict.json: leaving the hunt's block had put SIGTERM's default action back."""
    with graceful_signals():
        pass  # the graph ran to its end
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGTERM)  # ignored: this process goes on to write its report
    with shielded_cleanup():
        pass  # closing the hunter keeps it so
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    with report_written():
        pass
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_a_sigterm_during_the_work_unwinds_it_and_nothing_is_held(handlers):
    with pytest.raises(KeyboardInterrupt), graceful_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # Python runs the handler between bytecodes
            pass
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_a_cleanup_that_fails_after_a_finished_hunt_gives_the_handlers_back(handlers):
    with graceful_signals():
        pass
    with pytest.raises(RuntimeError), shielded_cleanup():
        raise RuntimeError("the store went away")
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
