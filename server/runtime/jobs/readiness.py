"""Waiting until a job is ready: a pattern in its output, a port that accepts.

Each condition given must hold, within one deadline; the job's exit first
ends the wait. The log is searched as it comes, line by line, so a match
is found once however the output is split; the unfinished last line is
carried over, bounded (`MAX_CARRIED_BYTES`). The port is tried on
127.0.0.1 until a connection is accepted (and closed at once).
"""

from __future__ import annotations

import re

import anyio

from bashrpc.protocol.terminals import ReadyState
from bashrpc.server.runtime.jobs.jobs import Job

# Between two connection attempts to a port that refused.
PORT_RETRY_SECONDS = 0.05
# A line longer than this is searched in pieces.
MAX_CARRIED_BYTES = 64 * 1024
LOOPBACK = "127.0.0.1"


async def wait_ready(
    job: Job, pattern: re.Pattern[str] | None, port: int | None, timeout: float
) -> tuple[ReadyState, str | None]:
    """("ready", the text matched), ("timeout", None) or ("exited", None)."""
    matched: str | None = None
    with anyio.move_on_after(timeout):
        if pattern is not None:
            matched = await _log_match(job, pattern)
            if matched is None:
                return "exited", None
        if port is not None and not await _port_open(job, port):
            return "exited", None
        return "ready", matched
    return "timeout", None


async def _log_match(job: Job, pattern: re.Pattern[str]) -> str | None:
    cursor = 0
    carried = b""
    while True:
        exited = job.exited.is_set()
        piece = job.ring.after(cursor)
        cursor = piece.end
        text = carried + piece.data
        found = pattern.search(text.decode("utf-8", "replace"))
        if found is not None:
            return found.group(0)
        carried = text[text.rfind(b"\n") + 1 :][-MAX_CARRIED_BYTES:]
        if exited:
            return None
        await job.changed()


async def _port_open(job: Job, port: int) -> bool:
    while not job.exited.is_set():
        try:
            stream = await anyio.connect_tcp(LOOPBACK, port)
        except OSError:
            with anyio.move_on_after(PORT_RETRY_SECONDS):
                await job.exited.wait()
            continue
        await stream.aclose()
        return True
    return False
