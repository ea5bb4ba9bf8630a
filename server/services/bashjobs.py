"""`bash` with `background` or `backgroundAfter`: the command as a background job.

The job runs in a shell of its own with the session's directory and
environment (`terminals.JobService.start`), so what it changes in its
shell (a `cd`, a variable) stays there. With `background` the answer comes
at once, with the job's terminal id; with `backgroundAfter` it comes when
the command ends, as any `bash` result (the job then released), or once the
seconds have passed, with the output so far and the terminal id, the
command going on. Pure but for the awaits on the job.
"""

from __future__ import annotations

import anyio

from bashrpc.protocol import messages, paths
from bashrpc.protocol.methods import BashParams, BashResult
from bashrpc.server import errors
from bashrpc.server.output.sink import count_lines
from bashrpc.server.output.utf8 import char_start
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.services import held
from bashrpc.server.services.held import Hold
from bashrpc.server.services.jobs import JobService, JobStart
from bashrpc.server.services.request import Caller, Command, Services
from bashrpc.server.services.streams import needs_input
from bashrpc.server.settings import Settings


def wanted(params: BashParams) -> bool:
    return params.background or params.background_after is not None


def check(params: BashParams) -> None:
    """What a job cannot do: a PTY, or a timeout (it runs until killed)."""
    if params.pty:
        raise errors.InvalidArgument(messages.BACKGROUND_WITH.format(field="pty"))
    if params.timeout is not None:
        raise errors.InvalidArgument(messages.BACKGROUND_WITH.format(field="timeout"))


async def run(terminals: JobService, params: BashParams, settings: Settings) -> BashResult:
    check(params)
    what = JobStart(
        params.session_id,
        params.command,
        env=params.env,
        cwd=params.cwd,
        sandbox=settings.sandbox.mode,
        secret_env=params.secret_env,
        redact=params.redact,
    )
    job = await terminals.start(what)
    if params.background_after is None:
        return _result(job, settings, messages.JOB_STARTED.format(terminal_id=job.id))
    try:
        with anyio.move_on_after(params.background_after):
            await job.exited.wait()
    except BaseException:
        # Aborted before it went to the background: it goes, as an aborted command does.
        with anyio.CancelScope(shield=True):
            await terminals.release(job)
        raise
    if not job.exited.is_set():
        notice = messages.JOB_STILL_RUNNING.format(
            seconds=messages.format_seconds(params.background_after), terminal_id=job.id
        )
        return _result(job, settings, notice)
    await terminals.release(job)
    return _result(job, settings, None)


def returns_on_input(params: BashParams) -> bool:
    """Whether a wait answers the request (only a PTY command is watched for one)."""
    return params.on_input == "return" and bool(params.pty)


async def on_input_return(
    caller: Caller, services: Services, planned: Command[BashResult], terminals: JobService
) -> BashResult:
    """The command run to its end, or answered when it first waits for its person."""
    spec = planned.spec

    def adopt(hold: Hold) -> Job | None:
        return terminals.adopt(hold, spec.command, spec.cwd, announce=True)

    done = await held.serve(caller, services, planned, lambda result: result.exit_code, adopt)
    if not isinstance(done, held.Adopted):
        return done
    kept = done.so_far
    working_dir, working_dir_base64 = paths.to_wire(done.job.spec.cwd)
    return BashResult(
        output=kept.decode("utf-8", "replace"),
        exit_code=None,
        cancelled=False,
        timed_out=False,
        truncated=len(kept) < done.total,
        total_lines=done.lines,
        total_bytes=done.total,
        output_lines=count_lines(kept),
        output_bytes=len(kept),
        working_dir=working_dir,
        working_dir_base64=working_dir_base64,
        terminal_id=done.job.id,
        needs_input=needs_input(done.wait),
    )


def _result(job: Job, settings: Settings, notice: str | None) -> BashResult:
    """The output so far (its tail within the output limit), and the job's id
    while it runs on; once it has ended, its exit code, as any `bash` result."""
    piece = job.ring.newest(None)
    data = piece.data
    start = char_start(data, max(0, len(data) - settings.output.max_bytes))
    kept = data[start:]
    truncated = piece.start + start > 0
    text = kept.decode("utf-8", "replace")
    if notice is not None:
        text = notice + "\n" + text
    working_dir, working_dir_base64 = paths.to_wire(job.spec.cwd)
    ended = notice is None
    status = job.exit if ended else None
    return BashResult(
        output=text,
        exit_code=None if status is None else status.code,
        cancelled=status is not None and status.code is None,
        timed_out=False,
        truncated=truncated,
        total_lines=job.ring.lines,
        total_bytes=job.ring.total,
        output_lines=count_lines(kept),
        output_bytes=len(kept),
        working_dir=working_dir,
        working_dir_base64=working_dir_base64,
        artifact_id=job.artifact_id if truncated else None,
        terminal_id=None if ended else job.id,
    )
