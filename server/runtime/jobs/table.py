"""A runtime's background jobs: their ids, their limits, and who hears of their end.

Jobs run in the runtime's task group (like its shells), so under the daemon
they live as long as the tenant does; `wind_down` (shutdown, `exit`, SIGTERM,
a detach grace run out) kills and releases them all. An owner (a clientId;
None on stdio) listens for the end of its jobs with `listen`; a job that
ends while its owner has no connection is kept untold, and told as soon as
the owner listens again. A released job is never told of.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import msgspec

from bashrpc.server import errors, log
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.runtime.jobs.job import Job, JobSpec, OnTerminal
from bashrpc.server.runtime.seam.backend import Backend, ProcessHandle
from bashrpc.server.settings import (
    DEFAULT_JOB_RING_BYTES,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_JOBS_PER_SESSION,
)

_log = log.get("jobs")
# Ended jobs kept for a host that has not released them (each holds its ring).
MAX_EXITED_KEPT = 64

# Told of a job that ended: the owner's way to send `terminal/exited`.
Listener = Callable[[Job], Awaitable[None]]


class JobLimits(msgspec.Struct, frozen=True):
    per_session: int = DEFAULT_MAX_JOBS_PER_SESSION
    total: int = DEFAULT_MAX_JOBS
    ring_bytes: int = DEFAULT_JOB_RING_BYTES


class JobTable:
    """A runtime's jobs, by terminal id, with their limits and the exit listeners."""

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        limits: JobLimits,
        backend: Backend,
        artifacts: ArtifactStore,
        grace: Callable[[], float],
    ) -> None:
        self._tg = tg
        self.limits = limits
        self._backend = backend
        self._artifacts = artifacts
        self._grace = grace
        self.jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)
        # Owner -> how to tell it that a job ended; and what it has not been told.
        self._listeners: dict[str | None, Listener] = {}
        self._untold: dict[str | None, list[Job]] = {}
        self.closed = False

    @property
    def running_count(self) -> int:
        """Jobs not yet ended (their program runs, or is being killed)."""
        return sum(job.state in ("running", "killing") for job in self.jobs.values())

    def check_room(self, session_id: str) -> None:
        """Refuse (TooManyJobs) a job past the per-session or total limit."""
        live = [job for job in self.jobs.values() if job.state != "exited"]
        if len(live) >= self.limits.total:
            raise errors.TooManyJobs(len(live), self.limits.total, None)
        mine = sum(1 for job in live if job.session_id == session_id)
        if mine >= self.limits.per_session:
            raise errors.TooManyJobs(mine, self.limits.per_session, session_id)

    async def start(self, session_id: str, owner: str | None, spec: JobSpec) -> Job:
        job = self._new(session_id, owner, spec)
        try:
            await job.start(self._backend)
        except BaseException:
            if job.artifact is not None:
                job.artifact.close()
            raise
        self._keep_running(job)
        return job

    def adopt(
        self,
        session_id: str,
        owner: str | None,
        spec: JobSpec,
        process: ProcessHandle,
        terminal: OnTerminal,
    ) -> Job:
        """A program already running on a terminal (a request's command that waits
        for its person, answered before its end) kept from now on as a job.
        TooManyJobs past the limits, as `start`."""
        job = self._new(session_id, owner, spec)
        job.take(process, terminal)
        self._keep_running(job)
        return job

    def _new(self, session_id: str, owner: str | None, spec: JobSpec) -> Job:
        if self.closed:
            raise errors.ShuttingDown
        self.check_room(session_id)
        terminal_id = f"term-{next(self._ids)}"
        return Job(
            terminal_id,
            session_id,
            owner,
            spec,
            self.limits.ring_bytes,
            self._artifacts.create(),
        )

    def _keep_running(self, job: Job) -> None:
        self._forget_old()
        self.jobs[job.id] = job
        self._tg.start_soon(self._keep, job)

    def _forget_old(self) -> None:
        """Ended jobs nobody released are kept up to `MAX_EXITED_KEPT`, the oldest
        forgotten first: memory stays bounded whatever a host forgets."""
        ended = [job for job in self.jobs.values() if job.done.is_set()]
        for job in ended[: max(0, len(ended) - MAX_EXITED_KEPT + 1)]:
            del self.jobs[job.id]
            job.move("release")

    async def _keep(self, job: Job) -> None:
        try:
            await job.run(self._grace)
        except Exception:
            _log.exception("job %s failed", job.id)
        if job.state != "released" and job.spec.announce:
            await self._announce(job)

    def get(self, session_id: str | None, terminal_id: str) -> Job:
        job = self.jobs.get(terminal_id)
        if job is None or (session_id is not None and job.session_id != session_id):
            raise errors.NoSuchTerminal(terminal_id)
        return job

    def of_session(self, session_id: str | None) -> list[Job]:
        return [j for j in self.jobs.values() if session_id is None or j.session_id == session_id]

    async def release(self, job: Job) -> None:
        """Kill it if it runs, forget it and all it held."""
        if self.jobs.get(job.id) is job:
            del self.jobs[job.id]
        if job.state != "released":
            job.move("release")
        await job.kill(self._grace())
        await job.done.wait()

    async def close_session(self, session_id: str) -> None:
        async with anyio.create_task_group() as tg:
            for job in self.of_session(session_id):
                tg.start_soon(self.release, job)

    async def wind_down(self) -> None:
        """Every job killed and released; no new one starts (idempotent)."""
        self.closed = True
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for job in list(self.jobs.values()):
                    tg.start_soon(self.release, job)

    # -- telling owners of an end -------------------------------------------

    def listen(self, owner: str | None, listener: Listener) -> list[Job]:
        """`listener` is told of `owner`'s jobs that end from now on; returns those
        that ended while nobody listened (the caller tells of them)."""
        self._listeners[owner] = listener
        untold = self._untold.pop(owner, [])
        for job in untold:
            self._tg.start_soon(self._announce, job)
        return untold

    def unlisten(self, owner: str | None, listener: Listener) -> None:
        if self._listeners.get(owner) is listener:
            del self._listeners[owner]

    async def _announce(self, job: Job) -> None:
        listener = self._listeners.get(job.owner)
        if listener is None:
            self._untold.setdefault(job.owner, []).append(job)
            return
        try:
            await listener(job)
        except Exception:
            _log.exception("telling of job %s's end failed", job.id)
