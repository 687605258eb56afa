"""Errors travel as one line: whatever text an exception carries, the line is there and says something."""

from __future__ import annotations

import pytest

from tools.text import first_line


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (RuntimeError("benchmark command exit 1\nTraceback (most recent call last):"), "benchmark command exit 1"),
        (RuntimeError("\n  the port was taken  \nmore"), "the port was taken"),  # a blank first line
        (TimeoutError(), "TimeoutError"),  # no message: its kind, not an IndexError
        ("", ""),  # text with nothing in it stays empty
        ("a" * 300, "a" * 300),
    ],
)
def test_the_first_line_that_says_something(value, line):
    assert first_line(value) == line


def test_a_line_can_be_cut():
    assert first_line(ValueError("x" * 300), 200) == "x" * 200


def test_a_count_of_one_takes_the_singular():
    from tools.text import counted

    assert [counted(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]
