"""Running one command on a PTY: a one-shot `bash -c` under the same limits as
shells, fed by its lane (input and size may come before the spawn); whatever
it starts is killed at its end; the program itself comes from the backend.
See `runners.py` for what both runners share.
"""

from __future__ import annotations

import anyio
import msgspec

from bashrpc.protocol.mcp import MAX_COLS, MAX_ROWS, MIN_COLS, MIN_ROWS
from bashrpc.server.runtime.run import env as envmod
from bashrpc.server.runtime.run import inputwatch
from bashrpc.server.runtime.run.inputwatch import InputWait
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.runtime.run.runners import Execution, RunResult
from bashrpc.server.runtime.seam import drain
from bashrpc.server.runtime.seam.backend import InputLook, PtyHandle, PtySpec, PtyStartFailed
from bashrpc.server.runtime.seam.shelltypes import ShellConfig
from bashrpc.server.runtime.sessions.pool import PtyLease, ShellPool
from bashrpc.server.runtime.sessions.session import Session

# How long a killed PTY program's exit status is awaited before giving up.
PTY_EXIT_WAIT_SECONDS = 1.0


DEFAULT_COLS, DEFAULT_ROWS = 120, 40


class Terminal(msgspec.Struct, frozen=True):
    cols: int
    rows: int


def clamp_size(cols: int | None, rows: int | None) -> tuple[int, int]:
    """A terminal size within limits; a missing side takes the default."""
    cols = DEFAULT_COLS if cols is None else min(max(cols, MIN_COLS), MAX_COLS)
    rows = DEFAULT_ROWS if rows is None else min(max(rows, MIN_ROWS), MAX_ROWS)
    return cols, rows


async def on_pty(
    pool: ShellPool, session: Session, execution: Execution, lane: PtyLane
) -> RunResult:
    """A one-shot `bash -c` on a PTY, under the same limits as shells.

    It starts at the lane's size (a resize may come before the spawn), opens
    the lane to input once spawned and closes it when the program is gone.
    Whatever it leaves running, background jobs included, is killed at the end.
    """
    try:
        return await _on_pty(pool, session, execution, lane)
    finally:
        lane.close()


async def _on_pty(
    pool: ShellPool, session: Session, execution: Execution, lane: PtyLane
) -> RunResult:
    workdir, fallback = _workdir(pool, session, execution)

    def spec(config: ShellConfig) -> PtySpec:
        return PtySpec(
            command=execution.command,
            config=config,
            cwd=workdir,
            env=envmod.for_terminal(session.env, execution.env),
            cols=lane.cols,
            rows=lane.rows,
            feed=execution.feed,
        )

    try:
        async with pool.pty_leased(session, spec) as lease:
            exit_code, timed_out = await _drive(pool, lease, execution, lane)
    except PtyStartFailed as failed:
        return RunResult(None, False, workdir, failed.reason, cwd_fallback=fallback)
    return RunResult(
        exit_code=exit_code,
        timed_out=timed_out,
        cwd=workdir,
        cwd_fallback=fallback,
        start_notices=lease.program.start_notices,
    )


def _workdir(
    pool: ShellPool, session: Session, execution: Execution
) -> tuple[str, tuple[str, str] | None]:
    """Where the program starts, and (directory, workspace) when the session's
    directory could not be entered: a request's absolute cwd is taken as it is."""
    workdir = execution.settled()
    if workdir.absolute:
        return workdir.path, None
    base, fallback = session.start_dir(pool.backend)
    return workdir.from_base(base), fallback


async def _drive(
    pool: ShellPool, lease: PtyLease, execution: Execution, lane: PtyLane
) -> tuple[int | None, bool]:
    run = lease.program
    lane.open(run, execution.typed)
    exit_code: int | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.pump)
        if run.start_log is not None:
            tg.start_soon(run.start_log.collect)
        with execution.arm():
            async with anyio.create_task_group() as watching:
                watching.start_soon(_watch_input, run, execution)
                exit_code = await lease.wait()
                await drain.until_quiet(run.eof, lambda: run.last_data)
                watching.cancel_scope.cancel()
        execution.input_wait = None
        lane.close()
        await run.kill(pool.grace_seconds)
        with anyio.move_on_after(drain.POST_KILL_SECONDS):
            await run.eof.wait()
        tg.cancel_scope.cancel()
    if exit_code is None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(PTY_EXIT_WAIT_SECONDS):
            await run.wait()
    return exit_code, execution.timed_out


async def _watch_input(run: PtyHandle, execution: Execution) -> None:
    """Keep `execution.input_wait` as the program stands, telling each new wait."""

    async def tell(look: InputLook, prompt: str, since: str) -> None:
        wait = InputWait(
            execution.request_id,
            execution.session_id,
            prompt,
            look.secret,
            since,
            look.pid,
            look.program,
            execution.terminal_id,
        )
        execution.input_wait = wait
        if execution.on_input is not None:
            await execution.on_input(wait)

    def ended() -> None:
        execution.input_wait = None

    async def prompt() -> str:
        return inputwatch.prompt_of(await run.snapshot())

    await inputwatch.watch(run, execution.settle, tell, ended, prompt)
