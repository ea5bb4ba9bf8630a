"""The user's shell setup, captured once and replayed into every persistent shell.

Agents' commands should see the aliases, functions, options and PATH of the
user's own shell, but an rc file must not be able to hang, pollute or kill
the server. So the rc runs once per (shell, environment, sandbox) in a
throwaway login shell with stdin from /dev/null, its output discarded, under a
deadline; an EXIT trap writes what it defined to a pipe of the server's, ending
with a marker so a half-written snapshot is never used, and the server writes
the snapshot file from what it read (bounded). Failure costs one warning.

The capture runs in the sandbox of the shells that replay it (the same policy).
An rc in a writable root (HOME in the workspace), or one that sources a file in
one (`. ~/.cargo/env`), is a file a command could have written: run on the host,
it would undo the sandbox at the next capture. With the sandbox off it runs on
the host, as the user's own shell would. Under a network allowlist it runs
with no way out (no session's proxy), so every session shares one capture.

A capture is a task of the runtime's, not of the request that first needed it,
and is let finish: at shutdown it gets up to WIND_DOWN_FINISH_SECONDS while it
makes progress (`hangup.Progress`) before it is hung up on. No moment of a
signal is safe: pyenv's `rehash` takes its lock before it sets the trap that
frees it, and a signal between the two left the lock behind, so every later
shell of the user that sourced the rc waited 60 s for it. That window is work
(forks, CPU), so it is waited out; an rc that sleeps or waits on something is
given up on after WIND_DOWN_STALL_SECONDS without progress, so a slow rc does
not hold up every end of the server. One given up on (at its deadline, or at
shutdown) is hung up on before it is killed: bash runs its EXIT traps on SIGHUP.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from subprocess import Popen

import anyio
import anyio.abc

from bashrpc.protocol import messages
from bashrpc.server import fdio, log
from bashrpc.server.errors import SandboxUnavailable
from bashrpc.server.observe.stats import STATS
from bashrpc.server.runtime.containment import child, procs
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.containment.trackers import Tracker
from bashrpc.server.runtime.local import hangup
from bashrpc.server.runtime.local.capturescript import COMPLETE_MARKER, capture_script, rc_file
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.seam.policy import Policy

# A snapshot larger than this is an rc's runaway output, not a setup.
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
DUMP_READ_BYTES = 64 * 1024
# Once the capture and all it started are gone, how long the pipe may take to end.
DUMP_EOF_SECONDS = 1.0
# At shutdown, the most a running capture may go on to finish by itself,
WIND_DOWN_FINISH_SECONDS = 5.0
# and how long it may make no progress meanwhile (an rc that sleeps).
WIND_DOWN_STALL_SECONDS = 0.3


def capture_slots() -> anyio.CapacityLimiter:
    """Room for captures at once: one per CPU the process may use. A capture is
    its rc's CPU work (forks, execs), so more at once only wait on each other,
    and on any lock their rc takes: pyenv's rehash takes one for each run, and
    a daemon's tenants capturing all at once kept each other waiting past the
    bound a tenant's end gives its capture, so the hang-up could land between
    pyenv taking its lock and setting the trap that frees it. A daemon's
    tenants share one (each tenant captures its own)."""
    return anyio.CapacityLimiter(max(1, len(os.sched_getaffinity(0))))


_log = log.get("snapshot")


# Runs nothing until it reads a line, then becomes the capture. So the capture
# starts the cheap way (setpriv and vfork, see `child`) and is still in its
# tracker before the rc runs a line. POSIX mode reads no startup file, not even
# $BASH_ENV, which a plain non-interactive bash would run before the `read`.
GATE = 'read -r _ && exec "$@"'


class Dump:
    """The pipe the capture's EXIT trap writes its dump to, read as it comes
    (a pipe's buffer is smaller than a big setup), bounded."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        os.set_blocking(self.write_end, True)
        self.data = bytearray()
        self.oversized = False
        self.eof = anyio.Event()

    async def read(self) -> None:
        """Until EOF; past MAX_SNAPSHOT_BYTES, read on but keep nothing."""
        while chunk := await fdio.read(self.read_end, DUMP_READ_BYTES):
            if self.oversized or len(self.data) + len(chunk) > MAX_SNAPSHOT_BYTES:
                self.oversized = True
                self.data.clear()
            else:
                self.data += chunk
        self.eof.set()

    @property
    def complete(self) -> bool:
        return not self.oversized and self.data.endswith(COMPLETE_MARKER.encode() + b"\n")

    def close_write(self) -> None:
        """The server's copy of the write end: closed once the capture has its own."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def close(self) -> None:
        self.close_write()
        anyio.notify_closing(self.read_end)
        os.close(self.read_end)


class Capture:
    """One capture running: its process (bwrap's, in a sandbox) and its tracker."""

    def __init__(self, process: Popen[bytes], tracker: Tracker, sandboxed: bool) -> None:
        self.process = process
        self.tracker = tracker
        self.sandboxed = sandboxed
        # Set once it is gone with all it started.
        self.gone = anyio.Event()

    async def wind_down(self) -> None:
        """Let it finish while it makes progress; hang up on what is left."""
        await hangup.while_progressing(
            self.tracker, WIND_DOWN_STALL_SECONDS, WIND_DOWN_FINISH_SECONDS
        )
        if not self.gone.is_set():
            await self.hang_up()

    async def hang_up(self) -> None:
        """SIGHUP to the shells, not to bwrap and its init: their death would kill
        every process in the sandbox at once, mid-trap."""
        chain = procs.chain(self.process.pid, procs.SANDBOX_INIT_DEPTH) if self.sandboxed else []
        await hangup.hang_up(self.tracker, spared=set(chain))


def _capture_cwd(policy: Policy | None) -> str:
    """Where a sandboxed capture starts: the workspace, there in every mode."""
    return policy.writable_roots[0] if policy is not None and policy.writable_roots else "/"


Key = tuple[str, tuple[tuple[str, str], ...], Policy | None]


class SnapshotStore:
    """Snapshots by (shell, environment, sandbox), made on first need, one per key,
    each by a task of `tasks` (the runtime's), whoever waits for it."""

    def __init__(
        self,
        directory: Path,
        containment: Containment,
        deadline: float,
        tasks: anyio.abc.TaskGroup,
        slots: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._dir = directory
        self._containment = containment
        self._deadline = deadline
        self._tasks = tasks
        # Captures this process runs at once (`capture_slots`), shared by a daemon's tenants.
        self._slots = capture_slots() if slots is None else slots
        self._cache: dict[Key, Path | None] = {}
        self._pending: dict[Key, anyio.Event] = {}
        self._count = 0
        # Generating shells, whose exit status anyio collects (the reaper skips them).
        self.pids: set[int] = set()
        # The captures running now, to let finish (or hang up on) at shutdown.
        self._running: set[Capture] = set()
        # Set when the runtime kills everything: a capture cut short then says
        # nothing about the rc, so it is not reported as the rc's failure.
        self.winding_down = False

    async def wind_down(self) -> None:
        """Let every running capture finish while it makes progress (at most
        WIND_DOWN_FINISH_SECONDS, and within its deadline); then hang up on it."""
        self.winding_down = True
        async with anyio.create_task_group() as tg:
            for capture in list(self._running):
                tg.start_soon(capture.wind_down)

    async def get(self, shell: str, env: Mapping[str, str], policy: Policy | None) -> Path | None:
        """The snapshot for shells of `shell` with `env` under `policy`; None
        without one. Cancelling this leaves the capture running for the next."""
        # One capture for every session's gateway: the rc runs with no way out.
        key: Key = (shell, tuple(sorted(env.items())), policy and policy.unserved)
        while key not in self._cache:
            made = self._pending.get(key)
            if made is None:
                made = self._pending[key] = anyio.Event()
                self._tasks.start_soon(self._make_for, key, env, made)
            await made.wait()
        return self._cache[key]

    async def _make_for(self, key: Key, env: Mapping[str, str], made: anyio.Event) -> None:
        """A task of the runtime's (a daemon's, for a tenant's capture): whatever
        fails in it costs what a failing rc does, never the server."""
        try:
            self._cache[key] = await self._make(key[0], env, key[2])
        except Exception as exc:
            self._failed(key[0], messages.SNAPSHOT_ERROR.format(error=exc))
        finally:
            self._cache.setdefault(key, None)
            del self._pending[key]
            made.set()

    async def _make(self, shell: str, env: Mapping[str, str], policy: Policy | None) -> Path | None:
        if os.path.basename(shell) != "bash":
            # The capture script is bash; other shells run without a snapshot.
            return None
        async with self._slots:
            if self.winding_down:
                # Its runtime ends: a capture now would be hung up on at once.
                return None
            return await self._run(shell, env, policy)

    async def _run(self, shell: str, env: Mapping[str, str], policy: Policy | None) -> Path | None:
        """One capture, in a slot of its own."""
        self._count += 1
        number = self._count
        dump = Dump()
        tracker = self._containment.tracker(f"snapshot{number}")
        capture = None
        try:
            # A sandbox that cannot start fails the session's shell too, and says why there.
            with contextlib.suppress(OSError, SandboxUnavailable):
                capture = await self._start(shell, env, policy, tracker, dump)
        finally:
            if capture is None:
                dump.close()
                tracker.release()
        if capture is None:
            return None
        try:
            async with anyio.create_task_group() as reading:
                reading.start_soon(dump.read)
                timed_out = await self._await(capture)
                with anyio.move_on_after(DUMP_EOF_SECONDS):
                    await dump.eof.wait()
                reading.cancel_scope.cancel()
            return self._keep(shell, number, dump, timed_out, capture.process.returncode)
        finally:
            dump.close()

    async def _start(
        self,
        shell: str,
        env: Mapping[str, str],
        policy: Policy | None,
        tracker: Tracker,
        dump: Dump,
    ) -> Capture | None:
        """Start the capture behind the gate (in `policy`'s sandbox) and let it
        through once it is placed; None once the runtime winds down."""
        argv = [shell, "--posix", "-c", GATE, "gate", shell, "-l", "-c"]
        argv.append(capture_script(shell, dump.write_end))
        launch = await bwrap.wrap(
            argv, policy, cwd=_capture_cwd(policy), runtime_dir=str(self._dir)
        )
        if self.winding_down:
            # Its wind-down did not wait for a capture not yet started: a tenant's
            # end removes its cgroups (the tracker's too) and its directory next.
            launch.close()
            return None
        gate_in, go = os.pipe()
        try:
            process = child.spawn(
                launch.argv,
                tracker=tracker,
                env={**env, procs.OWNER_ENV: tracker.tag},
                stdin=gate_in,
                pass_fds=(*launch.pass_fds, dump.write_end),
                # bwrap starts its namespace at once: placed before it runs.
                waits_for_input=policy is None,
            )
            os.write(go, b"\n")
        finally:
            os.close(gate_in)
            os.close(go)
            launch.close()
            dump.close_write()
        capture = Capture(process, tracker, sandboxed=policy is not None)
        self.pids.add(process.pid)
        self._running.add(capture)
        return capture

    async def _await(self, capture: Capture) -> bool:
        """Wait for the capture within the deadline; then whatever is left of it
        goes (hung up on first). Whether the deadline passed."""
        process, tracker = capture.process, capture.tracker
        try:
            with anyio.move_on_after(self._deadline) as deadline:
                await child.wait(process)
                tracker.leader_exited()
            return deadline.cancelled_caught
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await capture.hang_up()
                # Whatever the rc started (agents, daemons) goes with it.
                leader = None if process.returncode is not None else process.pid
                await tracker.kill(leader, 0.0)
                await child.wait(process)
                tracker.release()
                self._running.discard(capture)
                self.pids.discard(process.pid)
                capture.gone.set()

    def _keep(
        self, shell: str, number: int, dump: Dump, timed_out: bool, status: int | None
    ) -> Path | None:
        """The snapshot file, written from a complete dump; else a warning."""
        if self.winding_down:
            # Cut short or not, the runtime starts no shell now, and its directory
            # goes next; a capture cut short says nothing about the rc.
            return None
        if timed_out or not dump.complete:
            self._failed(shell, self._failure(timed_out, dump.oversized, status))
            return None
        path = self._dir / f"snapshot-{number}.sh"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(dump.data)
        STATS.rc_captured(ok=True)
        return path

    def _failed(self, shell: str, reason: str) -> None:
        """One warning, one failure counted; none for a capture the wind-down cut
        short, which says nothing about the rc."""
        if not self.winding_down:
            _log.warning(messages.SNAPSHOT_FAILED.format(rc=rc_file(shell), reason=reason))
            STATS.rc_captured(ok=False)

    def _failure(self, timed_out: bool, oversized: bool, status: int | None) -> str:
        if timed_out:
            return messages.SNAPSHOT_TIMED_OUT.format(
                seconds=messages.format_seconds(self._deadline)
            )
        if oversized:
            return messages.SNAPSHOT_TOO_LARGE.format(mib=MAX_SNAPSHOT_BYTES // (1024 * 1024))
        return messages.SNAPSHOT_EXITED.format(status=status)
