"""The executor: one command on a session's shell, with timeout, abort and output.

Both surfaces (the host's `bash` and the model's `tools/call`) run through
`Executor.run`. It picks the shell, feeds output into the sink and the
streaming callback, enforces the deadline, and on abort or timeout kills
everything the command started before it answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio

from protocol import messages
from server import drain, log, procs
from server import env as envmod
from server.crfold import CarriageReturnFolder
from server.pty import PtyRun
from server.sessions import Session, ShellPool, expand_home, resolve_path
from server.shell import Backpressure, Completion, Shell, ShellDied
from server.shellproto import SNAPSHOT_ENV, SOURCE_SNAPSHOT
from server.sink import OutputSink, SinkSummary

_log = log.get("executor")
_pty_names = itertools.count(1)


class Execution:
    """A running command, as seen by whoever may abort it (or type into its PTY)."""

    def __init__(self, request_id: object, session_id: str) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.scope = anyio.CancelScope()
        self.aborted = False
        self.finished = False
        self.pty: PtyRun | None = None

    def abort(self) -> bool:
        if self.finished or self.aborted:
            return False
        self.aborted = True
        self.scope.cancel()
        return True


@dataclass(frozen=True, slots=True)
class Outcome:
    summary: SinkSummary
    exit_code: int | None
    cancelled: bool
    timed_out: bool
    timeout: float | None
    working_dir: str | None
    artifact_id: int | None
    # The artifact stopped at a size cap.
    artifact_truncated: bool = False

    @property
    def notice(self) -> str | None:
        if self.timed_out and self.timeout is not None:
            return messages.timed_out_notice(self.timeout)
        if self.cancelled:
            return messages.NOTICE_CANCELLED
        return None


@dataclass(frozen=True, slots=True)
class PtyRequest:
    """What the PTY path needs beyond a pipe command."""

    cols: int
    rows: int
    on_raw: Callable[[bytes], None]
    # Per-command variables, over the session's environment.
    env: Mapping[str, str] = field(default_factory=dict)


class Executor:
    def __init__(self, shells: ShellPool, grace_seconds: float) -> None:
        self._shells = shells
        self.grace_seconds = grace_seconds
        # PTY children, whose exit status is collected here, not by the reaper.
        self.pty_pids: set[int] = set()

    async def run(
        self,
        session: Session,
        command: str,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        timeout: float | None,
        sink: OutputSink,
        on_text: Callable[[bytes], None],
        execution: Execution,
        backpressure: Backpressure | None = None,
    ) -> Outcome:
        def feed(data: bytes) -> None:
            clean = sink.feed(data)
            if clean:
                on_text(clean)

        if cwd is not None:
            # Data for `cd`, never shell text: `~` is expanded here, as on a PTY.
            cwd = expand_home(cwd, session.home)
        one_shot = session.busy
        shell: Shell | None = None
        completion: Completion | None = None
        timed_out = False
        if not one_shot:
            session.busy = True
        try:
            with execution.scope:
                with anyio.move_on_after(timeout) as deadline:
                    shell = await self._acquire(session, one_shot)
                    try:
                        completion = await shell.run(
                            command, cwd=cwd, env=env, on_output=feed, backpressure=backpressure
                        )
                    except ShellDied:
                        # Killed between commands: a fresh shell takes the command.
                        await self._discard(session, shell, one_shot)
                        shell = await self._acquire(session, one_shot)
                        completion = await shell.run(
                            command, cwd=cwd, env=env, on_output=feed, backpressure=backpressure
                        )
                timed_out = deadline.cancelled_caught
            execution.finished = True
            with anyio.CancelScope(shield=True):
                if shell is not None and (completion is None or completion.shell_died or one_shot):
                    await self._discard(session, shell, one_shot)
        finally:
            execution.finished = True
            if not one_shot:
                session.busy = False
            session.last_used = anyio.current_time()
        tail = sink.finish()
        if tail:
            on_text(tail)
        artifact_id = None if sink.spill is None else sink.spill.close()
        artifact_truncated = sink.spill is not None and sink.spill.cut
        if completion is not None and completion.cwd is not None and not one_shot:
            session.cwd = completion.cwd
        return Outcome(
            summary=sink.summary(),
            exit_code=None if completion is None else completion.exit_code,
            cancelled=completion is None,
            timed_out=timed_out,
            timeout=timeout,
            working_dir=completion.cwd
            if completion is not None and completion.cwd
            else session.cwd,
            artifact_id=artifact_id,
            artifact_truncated=artifact_truncated,
        )

    async def _acquire(self, session: Session, one_shot: bool) -> Shell:
        if one_shot:
            return await self._shells.start(session.config, session.env, session.cwd)
        if session.shell is None or session.shell.dead:
            if session.shell is not None:
                await self._shells.close(session.shell, 0)
            session.shell = await self._shells.start(session.config, session.env, session.cwd)
        return session.shell

    async def _discard(self, session: Session, shell: Shell, one_shot: bool) -> None:
        await self._shells.close(shell, self.grace_seconds)
        if not one_shot and session.shell is shell:
            session.shell = None

    async def run_pty(
        self,
        session: Session,
        command: str,
        *,
        cwd: str | None,
        timeout: float | None,
        sink: OutputSink,
        on_text: Callable[[bytes], None],
        execution: Execution,
        terminal: PtyRequest,
    ) -> Outcome:
        """A one-shot `bash -c` on a PTY; whatever it leaves behind is killed at the end.

        A PTY command holds a terminal and a shell, so it counts toward the shell limits.
        """
        async with self._shells.pty_slot():
            return await self._run_pty(
                session,
                command,
                cwd=cwd,
                timeout=timeout,
                sink=sink,
                on_text=on_text,
                execution=execution,
                terminal=terminal,
            )

    async def _run_pty(
        self,
        session: Session,
        command: str,
        *,
        cwd: str | None,
        timeout: float | None,
        sink: OutputSink,
        on_text: Callable[[bytes], None],
        execution: Execution,
        terminal: PtyRequest,
    ) -> Outcome:
        folder = CarriageReturnFolder()

        def feed(raw: bytes) -> None:
            terminal.on_raw(raw)
            folded = folder.feed(raw)
            if folded:
                clean = sink.feed(folded)
                if clean:
                    on_text(clean)

        if session.config.prefix:
            command = f"{session.config.prefix} {command}"
        workdir = resolve_path(session.cwd, cwd, session.home) if cwd else session.cwd
        env = envmod.for_terminal(session.env, terminal.env)
        tracker = self._shells.containment.tracker(f"pty{next(_pty_names)}")
        env[procs.OWNER_ENV] = tracker.tag
        config = await self._shells.with_snapshot(session.config, session.env)
        if config.snapshot is not None:
            # On its own line, so the command is parsed after the snapshot's aliases exist.
            env[SNAPSHOT_ENV] = config.snapshot
            command = f"{SOURCE_SNAPSHOT}\n{command}"
        run = PtyRun(
            [session.config.shell, "-c", command],
            cwd=workdir,
            env=env,
            cols=terminal.cols,
            rows=terminal.rows,
            on_output=feed,
            tracker=tracker,
        )
        exit_code: int | None = None
        timed_out = False
        try:
            run.start()
        except Exception as exc:  # ptyprocess re-raises the child's error as any type
            tracker.release()
            on_text(sink.feed(messages.PTY_ERROR.format(reason=exc).encode()))
        else:
            pid = run.pid
            assert pid is not None
            self.pty_pids.add(pid)
            execution.pty = run
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run.pump)
                    with execution.scope:
                        with anyio.move_on_after(timeout) as deadline:
                            exit_code = await run.wait()
                            await drain.until_quiet(run.eof, lambda: run.last_data)
                        timed_out = deadline.cancelled_caught
                    execution.finished = True
                    # Background jobs, or everything on abort: nothing outlives the command.
                    await run.kill(self.grace_seconds)
                    with anyio.move_on_after(drain.POST_KILL_SECONDS):
                        await run.eof.wait()
                    tg.cancel_scope.cancel()
                if exit_code is None:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                        await run.wait()
            finally:
                execution.finished = True
                self.pty_pids.discard(pid)
                run.close()
        last_line = folder.finish()
        if last_line:
            on_text(sink.feed(last_line))
        tail = sink.finish()
        if tail:
            on_text(tail)
        session.last_used = anyio.current_time()
        return Outcome(
            summary=sink.summary(),
            exit_code=exit_code,
            cancelled=exit_code is None and run.pid is not None,
            timed_out=timed_out,
            timeout=timeout,
            working_dir=workdir,
            artifact_id=None if sink.spill is None else sink.spill.close(),
            artifact_truncated=sink.spill is not None and sink.spill.cut,
        )
