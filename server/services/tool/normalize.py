"""Normalizing a model's bash command before it runs (pure).

Models habitually pipe into `head`/`tail` to keep output short, which hides
the exit status of the real command and defeats the artifact. One trailing
`| head -n N` / `| tail -N` is lifted out into the `head`/`tail` arguments,
which the server applies to the full output instead.
"""

from __future__ import annotations

import re

import msgspec

# One pipe (not `||`, not an escaped `\|`) into head/tail with a line count,
# anchored at the very end of the command (trailing spaces allowed).
_TRAILING = re.compile(
    r"""
    (?<![|\\])\|(?!\|)          # a single, unescaped pipe
    [ \t]*(?P<tool>head|tail)
    [ \t]+(?:-n[ \t]*(?P<n>\d+)|-(?P<short>\d+))
    [ \t]*\Z
    """,
    re.VERBOSE,
)


class Normalized(msgspec.Struct, frozen=True):
    command: str
    head: int | None
    tail: int | None


def normalize(command: str, head: int | None = None, tail: int | None = None) -> Normalized:
    """Trim, then lift one trailing head/tail pipe; explicit arguments win."""
    command = command.strip()
    match = _TRAILING.search(command)
    if match is not None:
        rest = command[: match.start()].rstrip()
        if rest:
            count = int(match.group("n") or match.group("short"))
            command = rest
            if match.group("tool") == "head":
                head = count if head is None else head
            else:
                tail = count if tail is None else tail
    return Normalized(command, head, tail)
