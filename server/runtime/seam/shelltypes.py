"""What makes a shell, and what a command's end reports: shared by the shell, its
pool and its sessions."""

from __future__ import annotations

import msgspec

from bashrpc.server.runtime.seam.policy import Policy


class ShellDied(Exception):
    """The shell was gone before it accepted the command."""


class ShellConfig(msgspec.Struct, frozen=True):
    """Everything that makes two shells interchangeable."""

    shell: str
    prefix: str | None
    snapshot: str | None
    env: tuple[tuple[str, str], ...]
    # The bubblewrap sandbox the shell runs in; None: none.
    sandbox: Policy | None = None


class Completion(msgspec.Struct, frozen=True):
    # None when the shell was killed (abort, timeout) or died without a status.
    exit_code: int | None
    cwd: str | None
    shell_died: bool
