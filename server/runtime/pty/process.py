"""One command on a pseudo-terminal: a one-shot `bash -c` under ptyprocess.

ptyprocess only forks and execs here. Its blocking helpers are not used:
the master fd is non-blocking and read on readiness (EIO is EOF), the exit
status comes from a pidfd, and killing signals the whole session, because
`terminate()` sleeps and signals one pid and `close()` blocks.
"""

from __future__ import annotations

import errno
import os
import signal
import termios
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import anyio.to_thread

from bashrpc.server import clock, fdio, log
from bashrpc.server.runtime.containment import child, inputwait, procfacts, procs
from bashrpc.server.runtime.containment.trackers import Tracker
from bashrpc.server.runtime.pty.screen import TerminalScreen
from bashrpc.server.runtime.sandbox.startlog import StartLog
from bashrpc.server.runtime.seam.backend import InputLook, Snapshot

if TYPE_CHECKING:
    from ptyprocess import PtyProcess

READ_CHUNK_BYTES = 64 * 1024
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)

_log = log.get("pty")


class PtyRun:
    """A running PTY command; the control methods find it by request id."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        cols: int,
        rows: int,
        on_output: Callable[[bytes], None],
        tracker: Tracker,
        start_log: StartLog | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self._argv = argv
        # Kept open in the child (bwrap's seccomp filter); the caller closes its own.
        self._pass_fds = tuple(pass_fds)
        # Run by bwrap, whose stderr it is: killing its namespace's init kills the
        # program's whole tree.
        self.start_log = start_log
        self.sandboxed = start_log is not None
        # What its sandbox's start did that its result says (the git guard's notices).
        self.start_notices: tuple[str, ...] = ()
        self.tracker = tracker
        self._cwd = cwd
        self._env = dict(env)
        self._on_output = on_output
        self.screen = TerminalScreen(cols, rows)
        self._cols, self._rows = cols, rows
        self._process: PtyProcess | None = None
        self.eof = anyio.Event()
        self.last_data = 0.0
        self.last_input = 0.0
        self.returncode: int | None = None
        self.finished = False

    @property
    def pid(self) -> int | None:
        return None if self._process is None else int(self._process.pid)

    @property
    def app_cursor(self) -> bool:
        return self.screen.app_cursor

    def start(self) -> None:
        """Fork and exec; raises OSError when the program cannot start."""
        cwd = self._cwd
        setup = child.child_setup(self.tracker)

        def in_child() -> None:
            # Python ignores these; a plain fork would pass that on (`yes | head`
            # would then complain of EPIPE instead of quietly dying).
            for sig in RESTORED_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            setup()
            # ptyprocess keeps them open but, unlike subprocess, leaves them close-on-exec.
            for fd in self._pass_fds:
                os.set_inheritable(fd, True)
            if self.start_log is not None:
                os.dup2(self.start_log.write_end, 2)
            # Here, so a bad cwd comes back as an exception, not a stray child.
            os.chdir(cwd)

        # Imported here: only PTY commands need it, and startup time matters.
        from ptyprocess import PtyProcess

        # ptyprocess closes all but these before `in_child`; the log's end is close-on-exec.
        log_fds = () if self.start_log is None else (self.start_log.write_end,)
        try:
            self._process = PtyProcess.spawn(
                self._argv,
                env=self._env,
                dimensions=(self._rows, self._cols),
                preexec_fn=in_child,
                pass_fds=(*self._pass_fds, *log_fds),
            )
        finally:
            if self.start_log is not None:
                self.start_log.started()
        os.set_blocking(self._process.fd, False)
        self.tracker.adopt(self._process.pid)
        self.last_data = clock.now()

    async def pump(self) -> None:
        """Read the master until EOF (EIO once every slave holder is gone)."""
        assert self._process is not None
        fd = self._process.fd
        try:
            while True:
                try:
                    data = await fdio.read(fd, READ_CHUNK_BYTES)
                except OSError as exc:
                    if exc.errno == errno.EIO:
                        return
                    raise
                if not data:
                    return
                self.last_data = clock.now()
                self.screen.feed(data)
                self._on_output(data)
                await anyio.lowlevel.checkpoint()
        finally:
            self.eof.set()

    async def wait(self) -> int:
        """The exit status, with 128+N for a signal; cancellable."""
        assert self._process is not None
        self.returncode = await child.wait_pid(self._process.pid)
        self.tracker.leader_exited()
        return self.returncode

    async def write(self, data: bytes) -> None:
        assert self._process is not None
        self.last_input = clock.now()
        await fdio.write_all(self._process.fd, data)

    def resize(self, cols: int, rows: int) -> None:
        """The kernel sends SIGWINCH to the foreground group when the size changes."""
        assert self._process is not None
        self._process.setwinsize(rows, cols)
        self.screen.resize(cols, rows)
        self._cols, self._rows = cols, rows

    async def snapshot(self) -> Snapshot:
        """The rendered screen; the emulator runs on a worker thread, never the loop."""
        async with self.screen.lock:
            render = self.screen.take()
            return await anyio.to_thread.run_sync(render)

    def echoes(self) -> bool:
        return bool(self._local_modes() & termios.ECHO)

    def _local_modes(self) -> int:
        """The terminal's lflag; ECHO when it cannot be read (assume the worst)."""
        if self._process is None or self._process.closed:
            return termios.ECHO
        try:
            return int(termios.tcgetattr(self._process.fd)[3])
        except termios.error:
            return termios.ECHO

    def input_look(self) -> InputLook:
        """The kernel's view of the program's processes (`inputwait`), and whether
        its terminal reads lines without echoing them (a password's prompt)."""
        if self._process is None or self._process.closed:
            return InputLook(False)
        found = inputwait.verdict(procfacts.look(self.tracker.members()))
        if not found.waiting:
            return InputLook(False, cpu=found.cpu)
        lflag = None
        if found.pid is not None and found.terminal_fd is not None:
            lflag = procfacts.terminal_modes(found.pid, found.terminal_fd)
        if lflag is None:
            lflag = self._local_modes()
        secret = not lflag & termios.ECHO and bool(lflag & termios.ICANON)
        return InputLook(True, found.pid, found.program, secret, found.cpu)

    async def kill(self, grace_seconds: float) -> None:
        """Kill the program first, then whatever it left running."""
        if self._process is not None:
            leader = None if self.returncode is not None else self._process.pid
            if leader is not None and self.sandboxed:
                leader = procs.sandbox_init(leader)
            await self.tracker.kill(leader, grace_seconds)

    def close(self) -> None:
        """Release the master; ptyprocess's own close() would block, so it is bypassed."""
        if self._process is not None and not self._process.closed:
            try:
                anyio.notify_closing(self._process.fd)
            except RuntimeError:
                pass
            self._process.fileobj.close()
            self._process.closed = True
        self.tracker.release()
