"""An execute-only copy of the shell's program, which the kernel runs non-dumpable.

A persistent shell's control pipe carries each command's token, and bash's
memory holds it while the command runs. A process the command starts runs
as the same user, and for a dumpable shell it may open `/proc/<shell>/fd/10`
(the control pipe, saved around the command's redirections) or read
`/proc/<shell>/mem`: it could then read the next driver line, or forge the
record. A program that its caller cannot read runs non-dumpable
(`would_dump`), and /proc opens the fds, memory, environment and ptrace of
a non-dumpable process only to a caller with CAP_SYS_PTRACE over it.

So a sandboxed shell runs a copy of its program of mode 0111, bound over
the program's own path, read-only (its `$0`, `$BASH` and error messages are
unchanged). In the confined modes the command holds no capability (even as
root, `--cap-drop ALL`), and as a user other than root in any mode it holds
none over the shell's namespace. The server, outside, still reads the
shell's /proc: as root with its capabilities, as any other user as the owner
of the user namespace bwrap made (the shell's creator's uid owns it).

What this does not cover: a program that is not an ELF binary (a script is
read by its interpreter), a runtime directory on a noexec mount (the copy
would not run), both said once in the log; and `full` as root, where the
command keeps root's capabilities (CAP_DAC_OVERRIDE reads the copy,
CAP_SYS_PTRACE reads any process).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio.to_thread

from bashrpc.protocol import messages
from bashrpc.server import log

EXECUTE_ONLY = 0o111
ELF_MAGIC = b"\x7fELF"
# The copies, in the server's runtime directory (hidden from every sandbox).
SEALED_DIR = "sealed"

_log = log.get("sealed")


class Sealed:
    """The copies a runtime made, one per program, made on first need."""

    def __init__(self, runtime_dir: Path) -> None:
        self._dir = runtime_dir / SEALED_DIR
        self._made: dict[str, tuple[str, str] | None] = {}
        self._lock = anyio.Lock()

    async def overlay(self, program: str) -> tuple[str, str] | None:
        """(the copy, the path it is bound over) for `program` (a name on PATH or
        a path), or None where it cannot be sealed (not found, not ELF, on noexec)."""
        async with self._lock:
            if program not in self._made:
                self._made[program] = await anyio.to_thread.run_sync(self._make, program)
            return self._made[program]

    def _make(self, program: str) -> tuple[str, str] | None:
        found = shutil.which(program)
        if found is None:
            return None
        target = os.path.realpath(found)
        try:
            with open(target, "rb") as source:
                if source.read(len(ELF_MAGIC)) != ELF_MAGIC:
                    _unsealed(target, messages.SEAL_NOT_ELF)
                    return None
                self._dir.mkdir(mode=0o700, exist_ok=True)
                if os.statvfs(self._dir).f_flag & os.ST_NOEXEC:
                    reason = messages.SEAL_NOEXEC.format(directory=self._dir.parent)
                    _unsealed(target, reason)
                    return None
                copy = self._dir / f"{len(self._made)}-{os.path.basename(target)}"
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
                with open(os.open(copy, flags, 0o700), "wb") as out:
                    source.seek(0)
                    shutil.copyfileobj(source, out)
        except OSError as exc:
            _unsealed(target, str(exc))
            return None
        copy.chmod(EXECUTE_ONLY)
        return str(copy), target


def _unsealed(program: str, reason: str) -> None:
    _log.warning(messages.SHELL_NOT_SEALED.format(program=program, reason=reason))
