"""A background job's states and the moves between them: pure, one table.

    running --kill--> killing --exit--> exited
    running --exit--> exited
    any of them --release--> released (the terminal id is gone)

A kill of a job that is killing or has exited changes nothing (ACP: the
terminal stays, with its output and exit status); anything asked of a
released job is refused. Stdin is a separate flag: open until closed, or
until the job exits.
"""

from __future__ import annotations

import signal
from typing import Literal

import msgspec

from bashrpc.protocol.terminals import JobState
from bashrpc.server import transitions

Event = Literal["kill", "exit", "release"]

TRANSITIONS: dict[tuple[JobState, Event], JobState] = {
    ("running", "kill"): "killing",
    ("running", "exit"): "exited",
    ("running", "release"): "released",
    ("killing", "kill"): "killing",
    ("killing", "exit"): "exited",
    ("killing", "release"): "released",
    ("exited", "kill"): "exited",
    ("exited", "release"): "released",
}


def step(state: JobState, event: Event) -> JobState:
    """The state after `event`; InvalidTransition when `state` does not take it
    (a bug, or a job already released)."""
    return transitions.step(TRANSITIONS, state, event)


class ExitStatus(msgspec.Struct, frozen=True):
    """How a job ended: an exit code, or the signal that killed it."""

    code: int | None
    signal: str | None


def exit_status(wait_status: int | None) -> ExitStatus:
    """From a raw wait status (os.waitpid's); None: collected elsewhere, taken as SIGKILL."""
    if wait_status is None:
        return ExitStatus(None, signal.Signals.SIGKILL.name)
    if os_waitstatus_signalled(wait_status):
        number = wait_status & 0x7F
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"SIG{number}"
        return ExitStatus(None, name)
    return ExitStatus((wait_status >> 8) & 0xFF, None)


def os_waitstatus_signalled(wait_status: int) -> bool:
    """WIFSIGNALED, without asking the os module (pure)."""
    low = wait_status & 0x7F
    return low != 0 and low != 0x7F
