"""A session's line of commands: one runs, the others wait their turn in order."""

from __future__ import annotations

import pytest

from bashrpc.server import errors
from bashrpc.server.runtime.sessions.cmdqueue import CommandLine


def test_the_first_runs_and_the_others_wait_in_arrival_order() -> None:
    line: CommandLine[str] = CommandLine()
    assert line.join("a") and line.busy
    assert not line.join("b") and not line.join("c")
    assert line.running == "a" and line.waiting == ["b", "c"]
    assert line.leave("a") == "b"
    assert line.leave("b") == "c"
    assert line.leave("c") is None
    assert not line.busy and line.waiting == []


def test_one_that_gives_up_waiting_leaves_the_line_and_never_gets_the_turn() -> None:
    line: CommandLine[str] = CommandLine()
    line.join("a")
    line.join("b")
    line.join("c")
    # Withdrawing a waiter changes nobody's turn.
    assert line.leave("b") is None
    assert line.running == "a" and line.waiting == ["c"]
    assert line.leave("a") == "c"


def test_a_full_line_refuses_the_next_as_busy() -> None:
    line: CommandLine[int] = CommandLine(limit=2)
    line.join(0)
    line.join(1)
    line.join(2)
    with pytest.raises(errors.ServerBusy):
        line.join(3)
    assert line.waiting == [1, 2]
    line.leave(0)
    assert not line.join(3)
    assert line.waiting == [2, 3]


def test_leaving_twice_or_unknown_changes_nothing() -> None:
    line: CommandLine[str] = CommandLine()
    line.join("a")
    line.join("b")
    assert line.leave("x") is None
    assert line.leave("b") is None
    assert line.leave("b") is None
    assert line.running == "a"
