"""What one exec may carry, counted as Linux counts it.

The kernel refuses an exec (E2BIG, "Argument list too long") when one string
of argv or envp, its NUL included, is longer than MAX_ARG_STRLEN (32 pages),
or when all of them, with a pointer each, pass its share of the stack: a
quarter of the stack rlimit, at most three quarters of 8 MiB, at least
128 KiB. An environment past either could never start a session's shell, and
every command of the session would fail; so it is refused when it is given.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping

import msgspec

POINTER_BYTES = struct.calcsize("P")
# MAX_ARG_STRLEN is 32 pages; the kernel's floor for the total is ARG_MAX (128 KiB).
_PAGES_PER_STRING = 32
_KERNEL_MIN_TOTAL_BYTES = 128 * 1024
# _STK_LIM / 4 * 3: the most the kernel lets argv and envp take, whatever the rlimit.
_KERNEL_MAX_TOTAL_BYTES = 8 * 1024 * 1024 // 4 * 3
# Kept free of the environment: the shell's own command line (bwrap's included),
# the variables the server and bash add, and the arguments of the commands run.
COMMAND_LINE_ROOM_BYTES = 64 * 1024


class ExecLimits(msgspec.Struct, frozen=True):
    # The longest string of argv or envp, its NUL included (MAX_ARG_STRLEN).
    string_bytes: int
    # All strings with their NULs and pointers (ARG_MAX as the kernel applies it).
    total_bytes: int


class TooLong(msgspec.Struct, frozen=True):
    """One `NAME=value` longer than an exec takes."""

    name: str
    size: int
    limit: int


class TooLarge(msgspec.Struct, frozen=True):
    """A whole environment larger than an exec takes, with room for command lines."""

    size: int
    limit: int
    room: int


def current() -> ExecLimits:
    """This machine's limits: its page size and the stack rlimit (via sysconf)."""
    total = min(max(os.sysconf("SC_ARG_MAX"), _KERNEL_MIN_TOTAL_BYTES), _KERNEL_MAX_TOTAL_BYTES)
    return ExecLimits(_PAGES_PER_STRING * os.sysconf("SC_PAGE_SIZE"), total)


def entry_bytes(name: str, value: str) -> int:
    """What `NAME=value` costs an exec: its bytes and NUL, and its pointer."""
    return len(os.fsencode(name)) + len(os.fsencode(value)) + 2 + POINTER_BYTES


def refusal(
    env: Mapping[str, str], given: Iterable[str], limits: ExecLimits
) -> TooLong | TooLarge | None:
    """Why `env` cannot be exec'd, or None. Only the `given` names are measured
    one by one: the others reached the server by an exec already, or come from
    its settings."""
    for name in given:
        value = env.get(name)
        if value is None:
            continue
        size = entry_bytes(name, value) - POINTER_BYTES
        if size > limits.string_bytes:
            return TooLong(name, size, limits.string_bytes)
    size = sum(entry_bytes(name, value) for name, value in env.items())
    if size + COMMAND_LINE_ROOM_BYTES > limits.total_bytes:
        return TooLarge(size, limits.total_bytes, COMMAND_LINE_ROOM_BYTES)
    return None
