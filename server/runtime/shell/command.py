"""One command on a persistent shell, from its fields to its completion.

A `Shell` is the bash process and its lifetime; a `CommandRun` is one command
on it: the output FIFO it takes, the status record (or the shell's end) that
ends it, and what the command before it left (the traps to restore, the
newest job). Its whole life is the table below:

    running --end--> ended --drained--> done
       |               |
       +-----cut-------+--> cut --collected--> done

- running: the shell has its fields; its output is forwarded, paused while
  the consumer is backlogged, until the first of its record and the shell's end.
- ended: the foreground part is over; the FIFO is drained, bounded by quiet
  (see `drain.py`).
- cut: cut short (abort, timeout, a shell that would not take it): what the
  dying command still writes is forwarded with no pause until the shell's
  killer collects it.
- done: the FIFO is back with the shell's `Fifos`, closed, or read and
  discarded until background jobs let go of it.

Only the first end counts: the shell exiting after the record, or after a
cut, changes nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Literal, get_args

import anyio

from bashrpc.server.runtime.seam import drain
from bashrpc.server.runtime.seam.backend import Backpressure
from bashrpc.server.runtime.shell.channels import Fifos
from bashrpc.server.runtime.shell.protocol import StatusRecord, command_fields
from bashrpc.server.transitions import step

# Plain strings, checked by the type checker: a transition is a dict lookup, no
# more (an enum member's access alone costs more than the lookup, on 3.11).
State = Literal["running", "ended", "cut", "done"]
# "end": the status record, or the shell's end; "collected": what the command
# wrote while its shell was killed has been read.
Event = Literal["end", "drained", "cut", "collected"]
STATES: tuple[State, ...] = get_args(State)

TRANSITIONS: dict[tuple[State, Event], State] = {
    ("running", "end"): "ended",
    ("running", "cut"): "cut",
    ("ended", "drained"): "done",
    ("ended", "cut"): "cut",
    ("cut", "collected"): "done",
    # Ends after the first.
    ("ended", "end"): "ended",
    ("cut", "end"): "cut",
    ("done", "end"): "done",
}


def advance(state: State, event: Event) -> State:
    """The state after `event`; InvalidTransition (a bug in the caller) when the
    table does not allow it."""
    return step(TRANSITIONS, state, event)


class CommandRun:
    """One command: takes a FIFO from `fifos` and gives it back when done."""

    def __init__(
        self,
        fifos: Fifos,
        previous: StatusRecord | None,
        on_output: Callable[[bytes], None],
        backpressure: Backpressure | None,
    ) -> None:
        self.state: State = "running"
        # The record that ended it; None until then, and when the shell ended first.
        self.record: StatusRecord | None = None
        self._fifos = fifos
        # The record of the command before: its traps, its newest job.
        self._previous = previous
        self.pipe = fifos.take(on_output, backpressure)
        # Our own writer keeps the FIFO from reading as EOF before the shell opens it.
        self._hold = self.pipe.fifo.hold()
        self._ended = asyncio.Event()

    def fields(self, command: str, cwd: str | None, env: Mapping[str, str]) -> bytes:
        """What the shell reads: the traps the command before it set come first."""
        prefix = "" if self._previous is None else self._previous.restore_prefix()
        return command_fields(cwd=cwd, prefix=prefix, command=command, env=env)

    @property
    def output(self) -> str:
        """Its output FIFO's name, in the shell's directory: for the driver line alone."""
        return self.pipe.fifo.name

    def end(self, record: StatusRecord | None) -> None:
        """The record, or None for the shell's end: the first wakes `until_ended`."""
        state = self.state
        self.state = advance(state, "end")
        if state == "running":
            self.record = record
            self._ended.set()
            self.pipe.poke()

    async def until_ended(self) -> StatusRecord | None:
        """Forward the output (by callback) until the end; then let the FIFO reach EOF."""
        await self.pipe.until(self._ended)
        os.close(self._hold)
        self._hold = -1
        return self.record

    async def drain(self) -> None:
        """What is left in the FIFO, then give it back.

        A command that started background jobs keeps only what they print at
        once; without, only something that left the job table (a subshell's
        `&`, a daemon) can still hold the FIFO."""
        before = None if self._previous is None else self._previous.last_job
        started_jobs = self.record is not None and self.record.last_job != before
        quiet = drain.JOBS_QUIET_SECONDS if started_jobs else drain.HELD_QUIET_SECONDS
        await self.pipe.drain(quiet)
        self.state = advance(self.state, "drained")
        self._fifos.settle(self.pipe)

    def cut(self) -> None:
        """Cut short: no more pauses for the consumer, until `collect`; no path to its FIFO."""
        self.state = advance(self.state, "cut")
        self.pipe.fifo.unlink()
        self._close_hold()
        self.pipe.release()

    async def collect(self) -> None:
        """After the kill, take what the dying command still wrote, then give the FIFO back."""
        with anyio.move_on_after(drain.POST_KILL_SECONDS):
            await self.pipe.eof.wait()
        self.state = advance(self.state, "collected")
        self._fifos.settle(self.pipe)

    def stop(self) -> None:
        """The shell is gone: stop reading. (The FIFO is the run's own until it is
        given back: its task may still be draining it.)"""
        self.pipe.stop()

    def _close_hold(self) -> None:
        if self._hold >= 0:
            os.close(self._hold)
            self._hold = -1
