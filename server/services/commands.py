"""The command service: one way to run a command, under both surfaces.

`stream(spec, listener, owner)` is all that `bash` and `tools/call` call
(`run` under the listener's streams). It checks
the spec, picks the PTY or the pipes, owns the sink and its artifact, keeps
the running command findable for abort and cancel, streams what it prints
to the listener, and ends both paths with the same finishing step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, SandboxMode
from bashrpc.server import clock, errors
from bashrpc.server.observe.stats import STATS
from bashrpc.server.output.redact import TableSource
from bashrpc.server.output.sink import OutputSink
from bashrpc.server.output.throttle import Owner
from bashrpc.server.runtime.instance import Runtime
from bashrpc.server.runtime.run import env as envmod
from bashrpc.server.runtime.run import ptyrunner, runners
from bashrpc.server.runtime.run.inputwatch import InputWait
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.runtime.run.ptyrunner import Terminal, clamp_size
from bashrpc.server.runtime.run.runners import Execution, RunResult
from bashrpc.server.runtime.sessions.session import Session, Ticket
from bashrpc.server.services import secrets, tightening
from bashrpc.server.services.denials import denial_notice, denied_path
from bashrpc.server.services.fieldchecks import env_fields, reject_nul, reject_unexecable
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.pipeline import Pipeline, finish
from bashrpc.server.services.streams import Listener, ListenerFactory

__all__ = ["CommandService", "CommandSpec", "Listener", "Outcome", "Terminal", "terminal"]


def clamp_timeout(seconds: float) -> float:
    return min(max(seconds, MIN_TIMEOUT_SECONDS), MAX_TIMEOUT_SECONDS)


def terminal(cols: int | None, rows: int | None) -> Terminal:
    """A PTY size within limits; a missing side takes the default."""
    return Terminal(*clamp_size(cols, rows))


class Flight(Protocol):
    """The request a command runs for; a cancel of it aborts the command."""

    def attach(self, abort: Callable[[], bool]) -> None: ...


class CommandSpec(msgspec.Struct, frozen=True):
    command: str
    session_id: str
    # None: where the session's shell is.
    cwd: str | None
    timeout: float | None
    # Bytes of output kept in memory (the rest goes to an artifact).
    max_bytes: int
    request_id: Any = None
    # For this command only, over the session's environment.
    env: dict[str, str] = msgspec.field(default_factory=dict)
    # A PTY of this size; None runs on pipes.
    terminal: Terminal | None = None
    # Where the spec's fields sit in the request, for error messages.
    field_prefix: str = ""
    # The sandbox of the session's shell, when this command creates the session.
    sandbox: SandboxMode = "off"
    # Whether a cancelled command is answered with its result; a cancelled tool call
    # is answered with an error, so a shell restart it caused is told in the next one.
    result_when_cancelled: bool = True
    # At once on a one-shot shell, without the session's state, rather than in its turn.
    one_shot: bool = False
    # Names of `env` entries whose values are secrets (`secretEnv`).
    secret_env: tuple[str, ...] = ()
    # False: the output keeps its secrets (checked against the settings by the surface).
    redact: bool = True


class CommandService:
    def __init__(self, runtime: Runtime, owner: str | None = None) -> None:
        self._runtime = runtime
        # Who opens the sessions a first command creates (see `Session.owner`).
        self.owner = owner
        self._executions: set[Execution] = set()
        # PTY requests accepted and not yet over, oldest first.
        self._lanes: list[PtyLane] = []

    async def run(
        self,
        spec: CommandSpec,
        listener: Listener,
        flight: Flight | None = None,
        began: Callable[[], None] | None = None,
    ) -> Outcome:
        """The command, in its session's turn (`began` is told when it has it)."""
        runtime = self._runtime
        session, command_env = self._session_for(spec)
        table = (
            secrets.table_for(runtime, session, spec.env, spec.secret_env) if spec.redact else None
        )
        sink = OutputSink(spec.max_bytes, runtime.artifacts.create, secrets.redactor(table))
        pipeline = Pipeline(sink, listener, spec.terminal is not None, table)
        execution = Execution(
            spec.request_id,
            session.id,
            spec.command,
            cwd=spec.cwd,
            env=command_env,
            timeout=spec.timeout,
            feed=pipeline.feed,
            deadlines=runtime.deadlines,
            one_shot=spec.one_shot,
            on_input=listener.on_input,
            settle=runtime.settings.input.settle_seconds,
        )
        STATS.started()
        self._executions.add(execution)
        runtime.executions.add(execution)
        if flight is not None:
            flight.attach(execution.abort)
        ticket = Ticket(spec.request_id)
        # A one-shot runs at once (after any reset); any other command in the session's turn.
        give_up = execution.give_up
        turn = session.apart(give_up) if spec.one_shot else session.turn(ticket, give_up)
        network = runtime.network_mark(session.id)
        try:
            async with turn:
                if began is not None and not execution.aborted:
                    began()
                # How long it ran is counted from here, after its wait for the turn.
                began_at = clock.now()
                # Where relative paths in the output are taken from (a command may `cd`).
                start = execution.take_turn(session).path
                with pipeline.releasing():
                    run = await self._now(spec, session, execution, listener, table)
        finally:
            self._executions.discard(execution)
            runtime.executions.discard(execution)
        outcome = finish(pipeline, run, spec.timeout)
        outcome = msgspec.structs.replace(
            outcome, queued_seconds=ticket.waited, one_shot=spec.one_shot
        )
        outcome = _with_notices(outcome, run.shell_restarted, spec, session, start)
        outcome = _with_refused_hosts(outcome, runtime.refused_hosts(session.id, network))
        STATS.finished_as(outcome.label, clock.now() - began_at, outcome.summary.total_bytes)
        return outcome

    def _session_for(self, spec: CommandSpec) -> tuple[Session, dict[str, str]]:
        """The spec's session (made on first use) and the command's own variables, checked."""
        reject_nul(
            {"command": spec.command, "cwd": spec.cwd, **env_fields(spec.env)}, spec.field_prefix
        )
        session = self._runtime.session(spec.session_id, spec.sandbox, self.owner)
        # Another connection of the tenant may have opened it looser: this one's mode holds.
        tightening.tighten(self._runtime, [session], spec.sandbox)
        command_env = envmod.without_guards(spec.env)
        if command_env:
            # The command's children exec the session's variables and these.
            reject_unexecable({**session.env, **command_env}, command_env, spec.field_prefix)
        return session, command_env

    async def _now(
        self,
        spec: CommandSpec,
        session: Session,
        execution: Execution,
        listener: Listener,
        table: TableSource | None,
    ) -> RunResult:
        """The command, now that it may run; nothing when it was aborted waiting."""
        if execution.aborted:
            return RunResult(exit_code=None, timed_out=False, cwd=session.cwd)
        runtime = self._runtime
        if spec.terminal is None:
            return await runners.on_pipes(runtime.pool, session, execution, listener.backpressure)
        lane = self._claim(spec.request_id, spec.terminal)
        if table is not None:
            lane.screen_filter = secrets.screen(table)
        return await ptyrunner.on_pty(runtime.pool, session, execution, lane)

    def input_waits(self, session_id: str) -> list[InputWait]:
        """The session's commands that wait for their person now: its requests'
        (and what went on of them as jobs), and its jobs that read their stdin."""
        runtime = self._runtime
        mine = [e.input_wait for e in runtime.executions if e.session_id == session_id]
        jobs = [j.input_wait for j in runtime.jobs.of_session(session_id) if j.terminal is None]
        return [wait for wait in [*mine, *jobs] if wait is not None]

    def told(self, wait: InputWait) -> Execution | None:
        """The command that told `wait` (an id may name another once its request
        was answered, so a command that outlives its answer is held by itself)."""
        for e in self._executions:
            if e.input_wait is wait:
                return e
        return None

    def running(self, session_id: str) -> bool:
        """Whether a command of the session runs (on its shell, a one-shot one or a
        PTY) or waits for its turn."""
        return self.running_count(session_id) > 0

    def running_count(self, session_id: str) -> int:
        """Commands of the session running or waiting now, whoever started them."""
        executions = self._runtime.executions
        return sum(execution.session_id == session_id for execution in executions)

    async def stream(
        self,
        spec: CommandSpec,
        listener: ListenerFactory,
        owner: Owner,
        flight: Flight | None = None,
        began: Callable[[], None] | None = None,
    ) -> Outcome:
        """`run` with the listener's streams flushing in `owner`, all flushed
        before this returns, however it ends (so every notification precedes the reply)."""
        out = listener(owner)
        try:
            return await self.run(spec, out, flight, began)
        finally:
            await out.close()

    def abort(self, *, request_id: Any = None, session_id: str | None = None) -> bool:
        """Abort running commands matching both filters (an absent filter matches all).
        A session's are found whoever started them (another connection of the
        daemon's tenant, maybe one since cut); without a session, only this service's."""
        aborted = False
        executions = self._executions if session_id is None else self._runtime.executions
        for execution in list(executions):
            if request_id is not None and execution.request_id != request_id:
                continue
            if session_id is not None and execution.session_id != session_id:
                continue
            aborted = execution.abort() or aborted
        return aborted

    def accept_pty(self, request_id: Any, size: Terminal) -> PtyLane:
        """A PTY request was accepted: from now on its input and size are taken,
        and kept until its program runs. The caller closes the lane when the
        request ends, in case the command never gets to run."""
        lane = PtyLane(request_id, size.cols, size.rows, self._lanes.remove)
        self._lanes.append(lane)
        return lane

    def pty(self, request_id: Any) -> PtyLane:
        """The lane of a PTY request in progress, for input, resize and screen: the
        newest of its id (an older one is a command answered already, gone on as
        a job, whose id JSON-RPC lets a new request take)."""
        for lane in reversed(self._lanes):
            if lane.request_id == request_id:
                return lane
        raise errors.NoSuchPty(request_id)

    def accepted_pty(self, request_id: Any) -> PtyLane | None:
        """The oldest lane accepted for this id that no command has taken yet:
        requests start in the order they were accepted, so a request asking
        before its command runs gets its own."""
        for lane in self._lanes:
            if lane.request_id == request_id and not lane.claimed:
                return lane
        return None

    def _claim(self, request_id: Any, size: Terminal) -> PtyLane:
        """The lane accepted for this request, or one made now (a caller that
        accepted none, such as a test driving the service directly)."""
        lane = self.accepted_pty(request_id) or self.accept_pty(request_id, size)
        lane.claimed = True
        return lane


def _with_refused_hosts(outcome: Outcome, hosts: list[str]) -> Outcome:
    """The hosts the sandbox's network allowlist refused the command, each once,
    beside any refused write (the same field: the sandbox said no)."""
    if not hosts:
        return outcome
    notice = messages.NETWORK_DENIED.format(hosts=", ".join(hosts))
    if outcome.sandbox_denied is not None:
        notice = f"{outcome.sandbox_denied}\n{notice}"
    return msgspec.structs.replace(outcome, sandbox_denied=notice)


def _with_notices(
    outcome: Outcome, restarted: bool, spec: CommandSpec, session: Session, start: str
) -> Outcome:
    """What the result tells besides the output: the shell's restart (once; a
    cancelled tool call leaves it to the next result) and the sandbox's doings."""
    aborted = outcome.cancelled and not outcome.timed_out
    if restarted and (spec.result_when_cancelled or not aborted):
        session.shell_lost = False
        if session.tightened_to is not None:
            notice = messages.SANDBOX_TIGHTENED.format(mode=session.tightened_to)
            outcome = msgspec.structs.replace(outcome, sandbox_tightened=notice)
            session.tightened_to = None
    policy = session.config.sandbox
    denied = denied_path(outcome.summary.text, outcome.exit_code, policy, start)
    if denied is not None and policy is not None:
        outcome = msgspec.structs.replace(outcome, sandbox_denied=denial_notice(denied, policy))
    return outcome
