"""Waiting until a job is ready: a pattern in its output, a port it listens on.

Each condition given must hold, within one deadline; the job's exit first
ends the wait. The pattern is searched in a process of its own
(`logsearch.py`, started by the backend like a job's program), which the
server feeds the job's output as it comes and kills when the wait ends: no
pattern and no output, however they backtrack, stall the event loop or
outlast the deadline. The port must be one the job's own processes listen
on (another program's listener on it does not count), and accept a
connection on 127.0.0.1 (closed at once).
"""

from __future__ import annotations

import contextlib
import sys

import anyio
import msgspec

from bashrpc.protocol.terminals import ReadyState
from bashrpc.server.runtime.jobs import logsearch
from bashrpc.server.runtime.jobs.jobs import Job
from bashrpc.server.runtime.seam.backend import Backend, JobLaunch, ProcessHandle
from bashrpc.server.runtime.seam.shelltypes import ShellConfig

# Between two looks at a port the job does not listen on yet.
PORT_RETRY_SECONDS = 0.05
LOOPBACK = "127.0.0.1"
# What the search may say besides its match (a traceback, were it to fail), kept at most.
MAX_ANSWER_BYTES = 1024 * 1024


async def wait_ready(
    job: Job, pattern: str | None, port: int | None, timeout: float, backend: Backend
) -> tuple[ReadyState, str | None]:
    """("ready", the text matched), ("timeout", None) or ("exited", None)."""
    matched: str | None = None
    with anyio.move_on_after(timeout):
        if pattern is not None:
            matched = await _log_match(job, pattern, backend)
            if matched is None:
                return "exited", None
        if port is not None and not await _port_open(job, port):
            return "exited", None
        return "ready", matched
    return "timeout", None


def _search_launch() -> JobLaunch:
    """The search's program: this interpreter, isolated, on `logsearch.py` alone."""
    config = ShellConfig(shell=sys.executable, prefix=None, snapshot=None, env=())
    return JobLaunch(sys.executable, ["-I", "-S", logsearch.__file__], config, "/", {})


async def _log_match(job: Job, pattern: str, backend: Backend) -> str | None:
    """The text the pattern matched; None once the job has exited without it."""
    search = await backend.job(_search_launch())
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_feed, job, search, pattern)
            matched = await _answer(search)
            tg.cancel_scope.cancel()
        if matched is None:
            # The search ended without a match: the job's exit (or the deadline) decides.
            await job.exited.wait()
        return matched
    finally:
        with anyio.CancelScope(shield=True):
            await search.kill(0)
            await search.wait()
            search.close()


async def _feed(job: Job, search: ProcessHandle, pattern: str) -> None:
    """The pattern, then the job's output as it comes; the input closed at its end."""
    with contextlib.suppress(BrokenPipeError, anyio.ClosedResourceError):
        await search.write(msgspec.json.encode(pattern) + b"\n")
        cursor = 0
        while True:
            exited = job.exited.is_set()
            piece = job.ring.after(cursor)
            if piece.end > cursor:
                cursor = piece.end
                await search.write(piece.data)
                continue
            if exited:
                search.close_input()
                return
            await job.changed()


async def _answer(search: ProcessHandle) -> str | None:
    """The match the search writes; None when it ends without one."""
    pending = b""
    while data := await search.read():
        pending = (pending + data)[-MAX_ANSWER_BYTES:]
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(logsearch.FOUND):
                return msgspec.json.decode(line[len(logsearch.FOUND) :], type=str)
    return None


async def _port_open(job: Job, port: int) -> bool:
    while not job.exited.is_set():
        if job.listens(port):
            try:
                stream = await anyio.connect_tcp(LOOPBACK, port)
            except OSError:
                pass
            else:
                await stream.aclose()
                return True
        with anyio.move_on_after(PORT_RETRY_SECONDS):
            await job.exited.wait()
    return False
