"""How long to keep reading after a command's foreground part has ended.

Background jobs can hold a command's output open indefinitely. What they
print right away is worth keeping; waiting for them is not. So reading goes
on until EOF, or DRAIN_IDLE_SECONDS of silence, or DRAIN_MAX_SECONDS in all
(a shell's FIFO reads what it held as the command ended whole first: see
`OutputPipe.drain`).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from bashrpc.server import clock

DRAIN_IDLE_SECONDS = 0.25
DRAIN_MAX_SECONDS = 2.0
# After a command whose shell reports background jobs: they may still be
# writing; what they print in one burst right away is kept.
JOBS_QUIET_SECONDS = 0.02
# No jobs, yet something holds the FIFO (a subshell's `&`, a daemon).
HELD_QUIET_SECONDS = DRAIN_IDLE_SECONDS
# Output still arriving after a kill is collected for at most this long.
POST_KILL_SECONDS = 0.3


async def until_quiet(eof: anyio.Event, last_data: Callable[[], float]) -> None:
    deadline = clock.now() + DRAIN_MAX_SECONDS
    while not eof.is_set():
        wait = min(last_data() + DRAIN_IDLE_SECONDS, deadline) - clock.now()
        if wait <= 0:
            return
        with anyio.move_on_after(wait):
            await eof.wait()
