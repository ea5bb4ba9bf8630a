"""A command request answered before its command ends, because the command waits
for its person: the command runs on as a background job of its session.

Who asked for it (a model's `tools/call` on a terminal, a `bash` with
`onInput: "return"`) gets its answer at once, with the output so far and the
job's id; the job is then answered (`terminal/write`, `pty/input`, the model's
`bash_input`), read and stopped as any other (`JobTable.adopt`).

`Hold` hears the command as one more of its text streams, from its start (so
the job's output begins where the command's did), and hears its waits; it is
also the job's process (`ProcessHandle`): its writes go to the command's
terminal, its kill aborts the command, its exit is the command's. `held` runs
the request in the connection's requests group, where it outlives its answer,
and returns when the command ends or first waits, whichever comes first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio
import msgspec

from bashrpc.server import errors, log
from bashrpc.server.output.throttle import Owner
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.runtime.run.runners import Execution
from bashrpc.server.runtime.seam.backend import InputLook, InputWait
from bashrpc.server.services import request
from bashrpc.server.services.commands import CommandService
from bashrpc.server.services.request import Caller, Command, Services
from bashrpc.server.services.streams import Listener, ListenerFactory

R = TypeVar("R")
# A reply's exit code (None: none).
Exit = Callable[[R], int | None]
_log = log.get("held")

# What of a held command's output waits for its job to read it, at most (its tail).
MAX_HELD_BYTES = 1024 * 1024
# How long a killed command may take to end, past its kill's grace, before its
# request is cancelled under it.
KILL_SETTLE_SECONDS = 5.0
# What a request sends once its command went on as a job: its terminal's bytes and
# its waits (a host's UI follows them); its progress ended with its answer.
_AFTER_ANSWER = frozenset({"pty/output", "bash/needsInput"})


def _nothing() -> None:
    return None


class Hold:
    """One command that may go on as a job: its output, its waits, its end."""

    def __init__(self, commands: CommandService, request_id: Any, session_id: str) -> None:
        self.commands = commands
        self.request_id = request_id
        self.session_id = session_id
        self._unread = bytearray()
        # Bytes of output so far, all told (what the answer showed ends here).
        self.total = 0
        self._newlines = 0
        self._unfinished = False
        self._eof = False
        self._changed = Pulse()
        self._input_closed = False
        # Its first told wait; then the command's end.
        self.first_wait: InputWait | None = None
        self.settled = anyio.Event()
        self.ended = anyio.Event()
        self._status: int | None = None
        # Set once its request answered: the command goes on as a job.
        self.answered = False
        # Where its request runs (`held`): cancelled, the command goes with it.
        self.scope = anyio.CancelScope()
        # Told of each wait (its job's, once it is one: see `JobService.adopt`).
        self.changed: Callable[[], None] = _nothing
        # Its command and terminal, found at its first wait: its request id may
        # name another once answered (JSON-RPC lets a new request take it).
        self._execution: Execution | None = None
        self.lane: PtyLane | None = None

    # -- the command's side: a text stream, and its waits -------------------

    def take(self, data: bytes) -> None:
        self.total += len(data)
        self._newlines += data.count(b"\n")
        self._unfinished = not data.endswith(b"\n")
        self._unread += data
        if len(self._unread) > MAX_HELD_BYTES:
            del self._unread[: len(self._unread) - MAX_HELD_BYTES]
        self._changed.fire()

    def end_of_output(self) -> None:
        self._eof = True
        self._changed.fire()

    async def told(self, wait: InputWait) -> None:
        if self.first_wait is None:
            self.first_wait = wait
            self._execution = self.commands.told(wait)
            try:
                self.lane = self.commands.pty(self.request_id)
            except errors.NoSuchPty:
                self.lane = None
        self.settled.set()
        self.changed()

    def finished(self, exit_code: int | None) -> None:
        """The command's end (None: it was stopped, or it failed)."""
        if not self.ended.is_set():
            self._status = None if exit_code is None else (exit_code & 0xFF) << 8
            self.ended.set()
            self.settled.set()

    @property
    def lines(self) -> int:
        """Lines of its output so far, a last one without LF counted."""
        return self._newlines + (1 if self._unfinished else 0)

    @property
    def held(self) -> int:
        """Bytes of output its job is yet to read: what it begins with, all it printed
        but for a tail past `MAX_HELD_BYTES`."""
        return len(self._unread)

    def so_far(self, max_bytes: int) -> bytes:
        """The newest of what it printed, within `max_bytes`."""
        return bytes(self._unread[-max_bytes:]) if max_bytes > 0 else b""

    def wrap(self, make: ListenerFactory) -> ListenerFactory:
        """The surface's listener, with this one hearing its text and its waits."""

        def listening(tg: Owner) -> Listener:
            return make(tg).joined(_Heard(self), self.told)

        return listening

    # -- the job's side: a ProcessHandle ------------------------------------

    @property
    def pid(self) -> int:
        """The program on the terminal (0 once it is gone)."""
        lane = self._open_lane()
        run = None if lane is None else lane.run
        pid = None if run is None else run.pid
        return 0 if pid is None else pid

    @property
    def input_open(self) -> bool:
        return not self._input_closed and not self.ended.is_set()

    def waiting(self) -> InputWait | None:
        """What the command waits for now (its wait ends when it is answered)."""
        return None if self._execution is None else self._execution.input_wait

    def named(self, terminal_id: str) -> None:
        """It goes on as job `terminal_id`: its waits, this one and those to come, name it."""
        execution = self._execution
        if execution is None:
            return
        execution.terminal_id = terminal_id
        wait = execution.input_wait
        if wait is not None:
            execution.input_wait = msgspec.structs.replace(wait, terminal_id=terminal_id)

    def input_look(self) -> InputLook:
        """Never waiting here: its runner watches its terminal (`waiting`)."""
        return InputLook(False)

    async def echoes(self) -> bool:
        lane = self._open_lane()
        try:
            run = None if lane is None else await lane.running()
        except errors.NoSuchPty:
            run = None
        return run is not None and run.echoes()

    async def read(self) -> bytes:
        while not self._unread and not self._eof:
            await self._changed.wait()
        data = bytes(self._unread)
        self._unread.clear()
        return data

    async def write(self, data: bytes) -> None:
        """Typed on the command's terminal, in turn with the host's `pty/input`."""
        lane = self._open_lane()
        if lane is None:
            raise BrokenPipeError
        token = object()
        lane.reserve(token)
        try:
            await lane.write(token, lambda _app_cursor: data)
        except errors.NoSuchPty:
            raise BrokenPipeError from None

    def close_input(self) -> None:
        self._input_closed = True

    def listens(self, port: int) -> bool:
        return False

    async def wait(self) -> int | None:
        await self.ended.wait()
        return self._status

    async def kill(self, grace_seconds: float) -> None:
        """The command aborted, as `abort_bash` would (its whole tree goes); its
        request cancelled if it has not ended after the kill's grace."""
        if self.ended.is_set():
            return
        if self._execution is not None:
            self._execution.abort()
        with anyio.move_on_after(grace_seconds + KILL_SETTLE_SECONDS):
            await self.ended.wait()
        self.scope.cancel()
        await self.ended.wait()

    def close(self) -> None:
        return None

    def _open_lane(self) -> PtyLane | None:
        """Its terminal, until its runner closes it."""
        lane = self.lane
        return None if lane is None or lane.closed else lane


def answered(caller: Caller, hold: Hold) -> None:
    """Its request answers now, its command going on as a job: the command's
    terminal stays open past the request's end (its runner closes it)."""
    hold.answered = True
    flight, lane = caller.flight, hold.lane
    if flight is not None and lane is not None:
        flight.hand_over(lane.close)


class _Heard:
    """The command's text, as one of its streams, for its hold."""

    def __init__(self, hold: Hold) -> None:
        self._hold = hold

    def push(self, data: bytes) -> None:
        self._hold.take(data)

    async def close(self) -> None:
        self._hold.end_of_output()


class Adopted(msgspec.Struct, frozen=True):
    """A request's command that waits for its person, gone on as a job: its first
    wait, and what it printed before (the answer shows it)."""

    job: Job
    wait: InputWait
    # Its newest output, within the spec's `max_bytes`; all it printed, in bytes
    # and in lines.
    so_far: bytes
    total: int
    lines: int
    # Where the answer's output ends in the job's own (which holds its tail alone
    # when it printed more than `MAX_HELD_BYTES`): a reader goes on from there.
    shown: int


async def serve(
    caller: Caller,
    services: Services,
    planned: Command[R],
    exit_code: Exit[R],
    adopt: Callable[[Hold], Job | None],
) -> R | Adopted:
    """The request's reply when its command ends before it waits (or waits when
    it cannot go on as a job, `adopt` finding no room or no session for it: then
    at its end); else the job it goes on as, `adopt`ed, its request answered
    from now on."""
    hold = Hold(services.commands, caller.id, planned.spec.session_id)
    running = await held(caller, services, planned, hold, exit_code)
    wait = hold.first_wait
    if wait is None or hold.ended.is_set():
        return await running.reply()
    try:
        job = adopt(hold)
    except errors.TooManyJobs:
        job = None
    if job is None:
        return await running.reply()
    answered(caller, hold)
    so_far = hold.so_far(planned.spec.max_bytes)
    wait = msgspec.structs.replace(wait, terminal_id=job.id)
    return Adopted(job, wait, so_far, hold.total, hold.lines, hold.held)


class Running(Generic[R]):
    """A request whose command may wait for its person before its end: answered by
    its surface then, or, when it cannot go on as a job, with `reply` at its end."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold
        self._reply: R | None = None
        self._error: Exception | None = None
        self._done = anyio.Event()

    async def reply(self) -> R:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._reply is not None
        return self._reply

    async def run(
        self, caller: Caller, services: Services, planned: Command[R], exit_code: Exit[R]
    ) -> None:
        """The request to its reply, in the hold's scope; the hold told its end. A
        failure after its answer is logged: nobody awaits its reply any more."""
        hold = self.hold
        try:
            with hold.scope:
                self._reply = await request.serve(_Answered(caller, hold), services, planned)
        except Exception as exc:
            self._error = exc
            if hold.answered:
                _log.exception("a command gone on as a job failed")
        finally:
            hold.finished(None if self._reply is None else exit_code(self._reply))
            self._done.set()


class _Answered:
    """The request's caller, its notifications after its answer only those a host's
    UI still follows (`_AFTER_ANSWER`)."""

    def __init__(self, caller: Caller, hold: Hold) -> None:
        self._caller = caller
        self._hold = hold

    @property
    def id(self) -> Any:
        return self._caller.id

    @property
    def flight(self) -> request.Flight | None:
        return self._caller.flight

    @property
    def connection(self) -> object:
        return self._caller.connection

    @property
    def tasks(self) -> Owner:
        return self._caller.tasks

    async def notify(self, method: str, params: msgspec.Struct) -> None:
        if not self._hold.answered or method in _AFTER_ANSWER:
            await self._caller.notify(method, params)


async def held(
    caller: Caller,
    services: Services,
    planned: Command[R],
    hold: Hold,
    exit_code: Exit[R],
) -> Running[R]:
    """The request run in the connection's requests group (where it outlives its
    answer), until its command ends or first waits, whichever comes first;
    `hold` is told its end. Cancelled meanwhile, the command is too."""
    running: Running[R] = Running(hold)
    wrapped = msgspec.structs.replace(planned, listener=lambda n: hold.wrap(planned.listener(n)))
    caller.tasks.start_soon(running.run, caller, services, wrapped, exit_code)
    try:
        await hold.settled.wait()
    except BaseException:
        hold.scope.cancel()
        raise
    return running
