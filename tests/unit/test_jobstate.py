"""A job's states and moves (`jobs/state.py`): the whole table, and exit statuses."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from typing import get_args

import pytest

from bashrpc.protocol.terminals import JobState
from bashrpc.server.runtime.jobs.state import (
    TRANSITIONS,
    Event,
    ExitStatus,
    exit_status,
    step,
)
from bashrpc.server.transitions import InvalidTransition


def test_the_moves_acp_describes() -> None:
    assert step("running", "kill") == "killing"
    assert step("killing", "exit") == "exited"
    assert step("running", "exit") == "exited"
    # A kill keeps the terminal; killing what ended changes nothing.
    assert step("exited", "kill") == "exited"
    assert step("killing", "kill") == "killing"
    for state in ("running", "killing", "exited"):
        assert step(state, "release") == "released"


@pytest.mark.parametrize(
    ("state", "event"), list(itertools.product(get_args(JobState), get_args(Event)))
)
def test_every_pair_moves_by_the_table_or_is_refused(state: JobState, event: Event) -> None:
    if (state, event) in TRANSITIONS:
        assert step(state, event) == TRANSITIONS[(state, event)]
    else:
        with pytest.raises(InvalidTransition):
            step(state, event)


def test_a_released_job_takes_nothing_more() -> None:
    for event in get_args(Event):
        with pytest.raises(InvalidTransition):
            step("released", event)


def _status_of(code: str) -> int:
    """A real child's raw wait status."""
    child = subprocess.Popen([sys.executable, "-c", code])
    _, status = os.waitpid(child.pid, 0)
    child.returncode = 0
    return status


def test_exit_statuses_from_real_children() -> None:
    assert exit_status(_status_of("raise SystemExit(3)")) == ExitStatus(3, None)
    killed = _status_of("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert exit_status(killed) == ExitStatus(None, "SIGTERM")
    # Collected by someone else: how it ended is lost, and taken as a kill.
    assert exit_status(None) == ExitStatus(None, signal.Signals.SIGKILL.name)
