"""The user's shell setup, captured once and replayed into every persistent shell.

Agents' commands should see the aliases, functions, options and PATH of the
user's own shell, but an rc file must not be able to hang, pollute or kill
the server. So the rc runs once per (shell, environment) in a throwaway login
shell with stdin from /dev/null, its output discarded, under a deadline; an
EXIT trap writes what it defined to a private file, ending with a marker so
a half-written snapshot is never used. Failure costs one warning.

A capture given up on (at its deadline, or at shutdown) is hung up on before
it is killed: bash runs its EXIT traps on SIGHUP, and an rc's traps release
what it holds. pyenv's `rehash` holds a lock file while it runs; SIGKILLed
there, it left the lock behind, and every later shell on the machine that
sourced the rc waited 60 s for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from subprocess import Popen

import anyio

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.observe.stats import STATS
from bashrpc.server.runtime.containment import child, procs
from bashrpc.server.runtime.containment.containment import Containment, Tracker
from bashrpc.server.runtime.local import hangup

COMPLETE_MARKER = "# bashrpc snapshot complete"
SNAPSHOT_OUT_ENV = "BASHRPC_SNAPSHOT_OUT"

# Names that agent commands rely on behaving as documented: functions and
# aliases by these names are not carried over.
SHADOWED_TOOLS = [
    "ls",
    "cat",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "fd",
    "sed",
    "awk",
    "gawk",
    "rm",
    "cp",
    "mv",
    "ln",
    "mkdir",
    "rmdir",
    "touch",
    "chmod",
    "chown",
    "head",
    "tail",
    "less",
    "more",
    "sort",
    "uniq",
    "wc",
    "cut",
    "tr",
    "tee",
    "xargs",
    "diff",
    "patch",
    "tar",
    "curl",
    "wget",
    "git",
    "make",
    "python",
    "python3",
    "pip",
    "pip3",
    "node",
    "npm",
    "npx",
    "cd",
    "echo",
    "printf",
    "test",
    "read",
    "eval",
    "source",
    "exec",
    "command",
    "builtin",
    "type",
    "which",
    "env",
    "kill",
    "wait",
    "trap",
    "set",
    "shopt",
    "alias",
    "unalias",
    "declare",
    "export",
    "unset",
    "local",
    "return",
    "exit",
]
# `set -o` options that would break or pollute non-interactive command runs.
UNCARRIED_OPTIONS = [
    "errexit",
    "noexec",
    "onecmd",
    "xtrace",
    "verbose",
    "monitor",
    "history",
    "emacs",
    "vi",
    "posix",
    "interactive-comments",
    "hashall",
    "braceexpand",
]

_log = log.get("snapshot")


def rc_file(shell: str) -> str:
    name = os.path.basename(shell)
    if name == "bash":
        return "~/.bashrc"
    if name == "zsh":
        return "~/.zshrc"
    return "~/.profile"


def capture_script(shell: str) -> str:
    """A bash script: trap the dump on EXIT (so `exit` in the rc still dumps), then source."""
    skip = "|".join(SHADOWED_TOOLS)
    options = "|".join(UNCARRIED_OPTIONS)
    return f"""
__bashrpc_dump() {{
  # Read the options first: the rc may have set -e/-u, which the dump turns off.
  local __opts __n __o __s
  __opts=$(set -o)
  set +e +u
  {{
    for __n in $(compgen -A function); do
      if [[ $__n == _* || $__n =~ ^({skip})$ ]]; then continue; fi
      declare -f -- "$__n"
    done
    for __n in $(compgen -a); do
      if [[ $__n =~ ^({skip})$ ]]; then continue; fi
      alias -- "$__n"
    done
    while IFS= read -r __o; do
      case $__o in *" login_shell"|*" restricted_shell") ;; *) printf '%s\\n' "$__o";; esac
    done <<< "$(shopt -p)"
    while read -r __o __s; do
      if [[ $__s == on && ! $__o =~ ^({options})$ ]]; then printf 'set -o %s\\n' "$__o"; fi
    done <<< "$__opts"
    printf 'export PATH=%q\\n' "$PATH"
    printf 'shopt -s expand_aliases\\n'
    printf '%s\\n' '{COMPLETE_MARKER}'
  }} >| "${SNAPSHOT_OUT_ENV}"
}}
trap '__bashrpc_dump' EXIT
source {rc_file(shell)}
"""


# Runs nothing until it reads a line, then becomes the capture. So the capture
# starts the cheap way (setpriv and vfork, see `child`) and is still in its
# tracker before the rc runs a line. POSIX mode reads no startup file, not even
# $BASH_ENV, which a plain non-interactive bash would run before the `read`.
GATE = 'read -r _ && exec "$@"'


def _start_gated(argv: list[str], tracker: Tracker, env: Mapping[str, str]) -> Popen[bytes]:
    """Start `argv` behind the gate and let it through once it is placed."""
    gate_in, go = os.pipe()
    try:
        process = child.spawn(
            [argv[0], "--posix", "-c", GATE, "gate", *argv],
            tracker=tracker,
            env=env,
            stdin=gate_in,
            waits_for_input=True,
        )
        os.write(go, b"\n")
    finally:
        os.close(gate_in)
        os.close(go)
    return process


def is_complete(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return data.endswith(COMPLETE_MARKER.encode() + b"\n")


class SnapshotStore:
    """Snapshots by (shell, environment), made on first need, one at a time per key."""

    def __init__(self, directory: Path, containment: Containment, deadline: float) -> None:
        self._dir = directory
        self._containment = containment
        self._deadline = deadline
        self._cache: dict[tuple[str, tuple[tuple[str, str], ...]], Path | None] = {}
        self._locks: dict[tuple[str, tuple[tuple[str, str], ...]], anyio.Lock] = {}
        self._count = 0
        # Generating shells, whose exit status anyio collects (the reaper skips them).
        self.pids: set[int] = set()
        # The captures running now, to hang up on at shutdown.
        self._running: set[Tracker] = set()
        # Set when the runtime kills everything: a capture cut short then says
        # nothing about the rc, so it is not reported as the rc's failure.
        self.winding_down = False

    async def wind_down(self) -> None:
        """Hang up on every running capture, before the runtime kills everything."""
        self.winding_down = True
        async with anyio.create_task_group() as tg:
            for tracker in list(self._running):
                tg.start_soon(hangup.hang_up, tracker)

    async def get(self, shell: str, env: Mapping[str, str]) -> Path | None:
        key = (shell, tuple(sorted(env.items())))
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._cache:
                self._cache[key] = await self._make(shell, env)
            return self._cache[key]

    async def _make(self, shell: str, env: Mapping[str, str]) -> Path | None:
        if os.path.basename(shell) != "bash":
            # The capture script is bash; other shells run without a snapshot.
            return None
        self._count += 1
        path = self._dir / f"snapshot-{self._count}.sh"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.close(fd)
        tracker = self._containment.tracker(f"snapshot{self._count}")
        run_env = {**env, SNAPSHOT_OUT_ENV: str(path), procs.OWNER_ENV: tracker.tag}
        process = _start_gated([shell, "-l", "-c", capture_script(shell)], tracker, run_env)
        self.pids.add(process.pid)
        self._running.add(tracker)
        timed_out = False
        try:
            with anyio.move_on_after(self._deadline) as deadline:
                await child.wait(process)
                tracker.leader_exited()
            timed_out = deadline.cancelled_caught
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await hangup.hang_up(tracker)
                # Whatever the rc started (agents, daemons) goes with it.
                leader = None if process.returncode is not None else process.pid
                await tracker.kill(leader, 0.0)
                await child.wait(process)
                tracker.release()
                self._running.discard(tracker)
                self.pids.discard(process.pid)
        if timed_out or not is_complete(path):
            path.unlink(missing_ok=True)
            if not self.winding_down:
                reason = self._failure(timed_out, process.returncode)
                _log.warning(messages.SNAPSHOT_FAILED.format(rc=rc_file(shell), reason=reason))
                STATS.rc_captured(ok=False)
            return None
        STATS.rc_captured(ok=True)
        return path

    def _failure(self, timed_out: bool, status: int | None) -> str:
        if timed_out:
            return messages.SNAPSHOT_TIMED_OUT.format(
                seconds=messages.format_seconds(self._deadline)
            )
        return messages.SNAPSHOT_EXITED.format(status=status)
