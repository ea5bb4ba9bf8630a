"""Watching a command for a wait on its person: a thin poller over the
program's `input_look` (the kernel's view), and the pure rule that turns looks
into waits (`Settling`). A PTY command is watched by its runner, a background
job by itself (its stdin is the pipe its person writes).

Nothing is looked at while the terminal prints: a look happens only once it has
been quiet for a poll's interval, so a command that never waits costs a timer.
A wait is told when the looks agree for the settle time: waiting, the same
process, and no CPU spent meanwhile; told once, then again only after it
ended: the person answered, or a look found the command busy or another
process asking. A full-screen program that redraws (`top`) waits on. An
answer ends the wait at once where it is written (the job, the PTY's lane);
the watch learns of it at its next look.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio

from bashrpc.server import clock
from bashrpc.server.runtime.seam.backend import InputLook, InputWait, Snapshot

__all__ = ["SETTLE_SECONDS", "InputWait", "Settling", "Watched", "last_line", "prompt_of", "watch"]

# The default settle time: how long looks must agree before a wait is told.
SETTLE_SECONDS = 1.0
# At most this long between looks (less for a shorter settle).
POLL_SECONDS = 0.25


class Settling:
    """The rule, fed one look (or a sign of output) at a time (pure)."""

    def __init__(self, settle: float) -> None:
        self.settle = settle
        self._first: InputLook | None = None
        self._first_at = 0.0
        # A wait was told and the command has not moved on since.
        self.told = False

    def moved(self) -> bool:
        """Whatever was seen is over (the command printed, or was answered). True
        when a told wait ended."""
        ended = self.told
        self._first, self.told = None, False
        return ended

    def look(self, look: InputLook, now: float) -> bool:
        """A look at `now`; True when a wait is to be told now. Another process
        asking is another wait; CPU spent restarts the settle of a wait not yet
        told, and leaves a told one as it is (a full-screen program redraws)."""
        first = self._first
        if not look.waiting or first is None or look.pid != first.pid:
            self.moved()
            if look.waiting:
                self._first, self._first_at = look, now
            return False
        if look.cpu != first.cpu:
            self._first = look
            if not self.told:
                self._first_at = now
            return False
        if self.told or now - self._first_at < self.settle:
            return False
        self.told = True
        return True

    @property
    def first_seen(self) -> float:
        return self._first_at


class Watched(Protocol):
    """What is watched: a PTY program, or a background job's."""

    # When its output last came, and when it was last typed into (loop time).
    @property
    def last_data(self) -> float: ...

    @property
    def last_input(self) -> float: ...

    def input_look(self) -> InputLook: ...


def prompt_of(screen: Snapshot) -> str:
    """The line the cursor is on, or the last line with text above it."""
    return last_line(screen.lines[: screen.cursor_y + 1])


def last_line(lines: list[str]) -> str:
    """The last line with text, without its trailing spaces."""
    for line in reversed(lines):
        if line.strip():
            return line.rstrip()
    return ""


async def watch(
    run: Watched,
    settle: float,
    tell: Callable[[InputLook, str, str], Awaitable[None]],
    ended: Callable[[], None],
    prompt: Callable[[], Awaitable[str]],
) -> None:
    """Look while the program runs (cancelled by its owner); `tell` a wait with
    its `prompt` and when it began (ISO 8601), `ended` when a told wait is over."""
    rule = Settling(settle)
    interval = min(POLL_SECONDS, settle / 4)
    looked = 0.0
    while True:
        # A told wait may last hours (a REPL): looked at once per settle time then.
        await anyio.sleep(settle if rule.told else interval)
        now = clock.now()
        if run.last_data >= looked and not rule.told:
            rule.moved()  # it printed since the last look: the settle starts again
        if run.last_input >= looked and rule.moved():
            ended()  # it was answered: that wait is over
        if now - run.last_data < interval:
            continue
        looked = now
        was_told = rule.told
        look = run.input_look()
        if rule.look(look, now):
            since = time.time() - (now - rule.first_seen)
            stamp = datetime.datetime.fromtimestamp(since, datetime.UTC).isoformat()
            await tell(look, await prompt(), stamp.replace("+00:00", "Z"))
        elif was_told and not rule.told:
            ended()
