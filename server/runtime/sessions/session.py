"""Sessions: a name, a shell configuration, a directory, and at most one live shell.

A session keeps one shell alive between commands, and its commands take
turns on it (`turn`, over the pure `cmdqueue.CommandLine`): one that arrives
while another runs waits, in arrival order, and then sees the state the
earlier ones left. Only a command that asks for it runs at once, in a
one-shot shell of the same configuration, without that state. The session
outlives its shells: when one dies or is evicted, the next command gets a
fresh one, in the session's directory when that shell can enter it (else in
the workspace, with a notice), and the first result after the loss says so.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import anyio

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server import clock
from bashrpc.server.runtime.seam.backend import Backend, ShellHandle
from bashrpc.server.runtime.seam.shelltypes import ShellConfig
from bashrpc.server.runtime.sessions.cmdqueue import CommandLine
from bashrpc.server.runtime.sessions.hold import Hold

# The scope a command's wait for its turn runs in, which an abort cancels: made
# only when it must wait.
GiveUp = Callable[[], anyio.CancelScope]


def expand_home(path: str, home: str | None) -> str:
    """`~` and `~/...` as the session's shell would expand them (`~user` too)."""
    if path == "~" or path.startswith("~/"):
        return path if home is None else home + path[1:]
    return os.path.expanduser(path)


def resolve_path(base: str, path: str, home: str | None) -> str:
    """`path` as a command would reach it from `base`, with `~` expanded, normalized."""
    return os.path.normpath(os.path.join(base, expand_home(path, home)))


class Ticket:
    """A command's place in its session's line."""

    def __init__(self, request_id: object) -> None:
        self.request_id = request_id
        # Made when it has to wait (most take the turn at once, and need none).
        self.ready: anyio.Event | None = None
        # Seconds it waited for its turn (0 when it had it at once).
        self.waited = 0.0


@dataclass(eq=False)
class Session:
    id: str
    config: ShellConfig
    # Fixed for the session's life (its secrets are found once, `SecretBook.of_session`).
    env: dict[str, str]
    cwd: str
    # Where a new shell starts when it cannot enter `cwd` (gone, or not in its sandbox).
    workspace: str
    shell: ShellHandle | None = None
    # Its commands, one running (on the shell, or a PTY), the others waiting.
    line: CommandLine[Ticket] = field(default_factory=CommandLine)
    last_used: float = field(default_factory=clock.now)
    # A shell of the session ended, taking its state, and no result has said so yet.
    shell_lost: bool = False
    # Where the host opened the session: what its sandbox shows, whatever its mode.
    opened_in: str = ""
    # The mode the sandbox was tightened to, closing a shell, and no result has said so yet.
    tightened_to: SandboxMode | None = None
    # Under the daemon, the clientId of the connection that opened it (if it named one).
    owner: str | None = None
    # Taken by a reset from its start to its answer: whatever arrives meanwhile waits.
    hold: Hold = field(default_factory=Hold)

    @property
    def busy(self) -> bool:
        return self.line.busy

    def turn(self, ticket: Ticket, give_up: GiveUp) -> Turn:
        """The session's turn for `ticket`'s command, held for an `async with`
        block, after any reset and the commands before it. Cancelling the scope
        `give_up` makes for a wait (an abort) leaves the line at once: the caller
        then runs nothing."""
        return Turn(self, ticket, give_up)

    def leave(self, ticket: Ticket) -> None:
        """`ticket`'s command is done, or gives up waiting: the next one's turn."""
        following = self.line.leave(ticket)
        if following is not None:
            # It waited, so it made its event when it joined.
            assert following.ready is not None
            following.ready.set()

    async def wait_for_turn(self, ticket: Ticket, give_up: GiveUp, *, queued: bool) -> None:
        """Until the reset holding the session is over (then in line) and the
        commands ahead have run, unless `give_up` is cancelled first; `queued`: in
        line already."""
        joined_at = clock.now()
        with give_up():
            if not queued:
                await self.hold.open()
                queued = not self.line.join(ticket)
            if queued:
                # Before any checkpoint: the one ahead sets it when it leaves.
                ticket.ready = anyio.Event()
                await ticket.ready.wait()
            ticket.waited = clock.now() - joined_at

    @contextlib.asynccontextmanager
    async def apart(self, give_up: GiveUp) -> AsyncIterator[None]:
        """For a one-shot command, which takes no turn: after any reset."""
        if not self.hold.free:
            with give_up():
                await self.hold.open()
        yield

    @property
    def sandbox_mode(self) -> SandboxMode:
        return "off" if self.config.sandbox is None else self.config.sandbox.mode

    @property
    def home(self) -> str | None:
        return self.env.get("HOME")

    def drop_shell(self) -> ShellHandle | None:
        """Forget the session's shell, which is being closed: the next result says
        the state it held is gone."""
        shell, self.shell = self.shell, None
        if shell is not None:
            self.shell_lost = True
        return shell

    def start_dir(self, backend: Backend) -> tuple[str, tuple[str, str] | None]:
        """Where a new shell of the session starts: the session's directory when that
        shell can enter it there, else the workspace (and then the pair of both)."""
        if self.cwd == self.workspace or backend.can_enter(self.cwd, self.config.sandbox):
            return self.cwd, None
        return self.workspace, (self.cwd, self.workspace)

    @property
    def idle_shell(self) -> ShellHandle | None:
        """The session's shell while alive and running no command."""
        if self.shell is None or self.busy or self.shell.dead:
            return None
        return self.shell


class SessionRegistry:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._anonymous = itertools.count(1)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def add(self, session: Session) -> Session:
        self._sessions[session.id] = session
        return session

    def pop(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def new_id(self) -> str:
        while True:
            candidate = f"session-{next(self._anonymous)}"
            if candidate not in self._sessions:
                return candidate

    def all(self) -> list[Session]:
        return list(self._sessions.values())


class Turn:
    """A command's turn in its session (`Session.turn`), held for a block. A
    class, not a generator: every command takes one, and an async generator's
    context manager costs the loop's bookkeeping of the generator too."""

    __slots__ = ("_give_up", "_session", "_ticket")

    def __init__(self, session: Session, ticket: Ticket, give_up: GiveUp) -> None:
        self._session = session
        self._ticket = ticket
        self._give_up = give_up

    async def __aenter__(self) -> None:
        session, ticket = self._session, self._ticket
        try:
            # Mostly no reset holds it and nobody is ahead: its turn comes at once,
            # with no wait to give up, so the scope is made only for a wait.
            free = session.hold.free
            if not (free and session.line.join(ticket)):
                await session.wait_for_turn(ticket, self._give_up, queued=free)
        except BaseException:
            session.leave(ticket)
            raise

    async def __aexit__(self, *_: object) -> None:
        self._session.leave(self._ticket)
