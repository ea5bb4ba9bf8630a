"""One persistent bash process, and the wire between it and the server.

How a command's end is found without reading its output:
- The shell reads a small driver line from a control pipe (its stdin), then the
  command itself as NUL-terminated fields, so any byte sequence is data.
- The command runs with ``eval`` in the shell itself (state persists), with
  stdin from /dev/null and stdout+stderr sent to a per-command FIFO.
- When ``eval`` returns, the shell writes a status record (its exit status,
  directory and more; see `protocol.py`) to a status FIFO, which the
  command has no descriptor of, with a token the command cannot read. That
  record, not the output, marks the end; anything else in the FIFO kills
  the shell (its session's next command starts a new one).
- Background jobs keep the FIFO open. After the status arrives the output is
  drained until EOF or a short silence (see `channels.py` and `drain.py`). A FIFO
  still held open then keeps being read (and discarded), so a chatty
  background job never blocks or dies of SIGPIPE.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel

from bashrpc.server import log
from bashrpc.server.runtime.containment import child, procs
from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.containment.trackers import Tracker
from bashrpc.server.runtime.sandbox import bwrap, startlog
from bashrpc.server.runtime.sandbox.sealed import Sealed
from bashrpc.server.runtime.seam.backend import Backpressure
from bashrpc.server.runtime.seam.shelltypes import Completion, ShellConfig, ShellDied
from bashrpc.server.runtime.shell.channels import Fifos
from bashrpc.server.runtime.shell.command import CommandRun
from bashrpc.server.runtime.shell.protocol import SNAPSHOT_ENV, BadRecord, StatusRecord
from bashrpc.server.runtime.shell.wire import ShellWire

SANDBOX_CHAIN = 3  # bwrap, its init (pid 1 of the namespace), then bash.
PRIVATE_DIR_MODE = 0o700
# The shell's directory while it runs: its files open by name, but no listing
# (in a sandbox, without capabilities, not even as root).
UNLISTED_DIR_MODE = 0o300

_log = log.get("shell")


class Shell:
    """A bash process that keeps its state between commands, one `CommandRun`
    at a time.

    Its lifetime is the ``serve`` task, started in a task group that outlives
    requests; the readers of its output live in the shell's own task group and
    end with it.
    """

    def __init__(
        self,
        config: ShellConfig,
        env: Mapping[str, str],
        cwd: str,
        runtime_dir: Path,
        name: str,
        tracker: Tracker,
        sealed: Sealed | None = None,
    ) -> None:
        self.config = config
        # Where a sandboxed shell's program comes from: one no command can read it through.
        self._sealed = sealed
        # Where it starts; where each command ended is in its Completion.
        self.cwd = cwd
        self.name = name
        self.tracker = tracker
        self.start_log: startlog.StartLog | None = None  # a sandboxed one's stderr, from its pool
        self.start_notices: tuple[str, ...] = ()
        self._env = dict(env)
        self._env[procs.OWNER_ENV] = tracker.tag
        if config.snapshot:
            self._env[SNAPSHOT_ENV] = config.snapshot
        # The shell's own directory (FIFOs, command file): all a sandbox must let it write.
        self._dir = runtime_dir / name
        self._fifos: Fifos | None = None
        # The pids of the shell's process chain (bwrap's two, then bash), once known.
        self._chain: set[int] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._wire: ShellWire | None = None
        # The command running, or the one cut short until its output is collected.
        self._run: CommandRun | None = None
        # The last command's record, which the next one starts from (its traps, its jobs).
        self._last: StatusRecord | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = anyio.Event()
        self._exited = anyio.Event()
        self.dead = False
        self.returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None or self.dead else self._process.pid

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._spawn()
                # Its directory exists now: the first command's FIFO is made ahead.
                self._fifos = Fifos(self._dir)
                task_status.started()
                await self._closed.wait()
                tg.cancel_scope.cancel()
        finally:
            if self._process is not None and not self._exited.is_set():
                await self._bury()
            self.dead = True
            if self._wire is not None:
                self._wire.close()
            if self._run is not None:
                self._run.stop()
            if self._fifos is not None:
                self._fifos.close()
            with contextlib.suppress(OSError):
                self._dir.chmod(PRIVATE_DIR_MODE)
            shutil.rmtree(self._dir, ignore_errors=True)

    async def _spawn(self) -> None:
        overlay = None
        if self.config.sandbox is not None and self._sealed is not None:
            overlay = await self._sealed.overlay(self.config.shell)
        launch = await bwrap.wrap(
            [self.config.shell, "--noprofile", "--norc"],
            self.config.sandbox,
            cwd=self.cwd,
            private_dir=str(self._dir),
            read_only_files=[self.config.snapshot] if self.config.snapshot else [],
            runtime_dir=str(self._dir.parent),
            overlays=[overlay] if overlay is not None else [],
        )
        self.start_notices = launch.notices
        self._dir.mkdir(mode=PRIVATE_DIR_MODE)
        self._wire = wire = ShellWire(self._dir, self.name, self._on_record, self._on_bad_record)
        # Names are all a command could find its channels by: it may not list them.
        self._dir.chmod(UNLISTED_DIR_MODE)
        try:
            self._process = child.spawn(
                launch.argv,
                tracker=self.tracker,
                stdin=wire.stdin,
                cwd=self.cwd,
                env=self._env,
                pass_fds=launch.pass_fds,
                stderr=self.start_log.write_end if self.start_log else subprocess.DEVNULL,
                # bwrap starts its namespace at once, and bash runs $BASH_ENV first.
                waits_for_input=not (self.config.sandbox or "BASH_ENV" in self._env),
            )
        finally:
            wire.spawned()
            launch.close()
        assert self._tg is not None
        self._tg.start_soon(self._watch_exit)
        await wire.start(self.config.snapshot is not None)

    def _on_record(self, record: StatusRecord | None) -> None:
        """A record, or the shell's end, ends the running command (the first of them)."""
        if self._run is not None:
            self._run.end(record)

    async def _watch_exit(self) -> None:
        """The one waiter on the shell's exit (a second would lose the status)."""
        assert self._process is not None
        self.returncode = await child.wait(self._process)
        self.dead = True
        self.tracker.leader_exited()
        self._exited.set()
        if self._wire is not None:
            self._wire.status.shell_exited()

    async def _bury(self) -> None:
        """Kill and collect the shell when ``serve`` ends before its exit was seen.

        That happens when the start is cut short (the request that needed the
        shell was cancelled just after the spawn) or the pool ends under a live
        shell: the watcher is cancelled with the task group, so nobody else would
        collect the process or wake a ``close`` waiting for its exit."""
        assert self._process is not None
        with anyio.CancelScope(shield=True):
            await self.tracker.kill(self._leader(), 0)
            self.returncode = await child.wait(self._process)
            self.tracker.leader_exited()
            self._exited.set()

    def _on_bad_record(self, bad: BadRecord) -> None:
        """Only the driver writes the status FIFO: a command that did dies with its shell."""
        _log.warning("killing shell %s: its status FIFO carried %s", self.name, bad)
        assert self._tg is not None
        self._tg.start_soon(self.tracker.kill, self._leader(), 0)

    def _leader(self) -> int | None:
        """Whom a kill stops first: the shell, or a sandboxed one's namespace init."""
        if self._process is None or self.dead:
            return None
        if self.config.sandbox is not None:
            # Its death takes the whole namespace down at once, so a command
            # that traps TERM runs not one more statement.
            return procs.sandbox_init(self._process.pid)
        return self._process.pid

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        env: Mapping[str, str],
        on_output: Callable[[bytes], None],
        backpressure: Backpressure | None = None,
    ) -> Completion:
        """Run one command. Cancelling this kills nothing: the caller owns that."""
        if self.dead or self._fifos is None:
            raise ShellDied
        if self.config.prefix:
            command = f"{self.config.prefix} {command}"
        wire = self._wire
        if wire is None or wire.status.ended:
            raise ShellDied
        run = self._run = CommandRun(self._fifos, self._last, on_output, backpressure)
        try:
            await wire.hand(run.fields(command, cwd, env), run.output, env)
            completion = await self._outcome(await run.until_ended())
            await run.drain()
        except BaseException:
            # The run stays current, forwarding what the dying command still
            # writes, until `collect_after_kill`.
            run.cut()
            raise
        self._run = None
        return completion

    async def _outcome(self, record: StatusRecord | None) -> Completion:
        """What the record, or the shell's end, says of the command."""
        if record is None:
            # The shell is gone or was replaced (`exec`): its exit status is the
            # command's. Cancellable: `exec sleep 60` must still be abortable.
            await self._wait_exit()
            return Completion(self.returncode, None, shell_died=True)
        self._last = record
        return Completion(record.status, record.pwd, shell_died=False)

    async def _wait_exit(self) -> None:
        if self._process is not None:
            await self._exited.wait()
        self.dead = True

    async def collect_after_kill(self) -> None:
        """After a kill, take what the dying command still wrote, then stop forwarding."""
        run = self._run
        if run is None or run.state != "cut":
            return
        self._run = None
        await run.collect()

    def tree(self, scan: Scan | None = None) -> set[int]:
        """Live processes this shell started, itself included, escapees too."""
        return self.tracker.members(scan)

    def jobs(self, scan: Scan | None = None) -> set[int]:
        """What the shell started that still runs: its tree less the shell itself
        (and, in a sandbox, bwrap and its init)."""
        if self._process is None:
            return set()
        chain = self._chain
        if chain is None:
            length = SANDBOX_CHAIN if self.config.sandbox else 1
            chain = set(procs.chain(self._process.pid, length))
            if len(chain) == length:
                self._chain = chain
        return self.tree(scan) - chain

    async def close(self, grace_seconds: float) -> None:
        """Kill the shell first, then everything it started; then end ``serve``."""
        with anyio.CancelScope(shield=True):
            if self._process is not None:
                await self.tracker.kill(self._leader(), grace_seconds)
                await self._wait_exit()
                await self.collect_after_kill()
            self.tracker.release()
            self._closed.set()
