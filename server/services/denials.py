"""Telling a write the sandbox refused from any other failure (pure).

A model that sees `Read-only file system` retries in circles; told that the
sandbox refused the path, it can ask the user instead. Only failed commands
are read, and only the lines where a tool reported EROFS: that is what a
read-only mount answers a write, and only a write. EACCES is not read: it
answers reads too (`stat of /x failed: Permission denied`), and no mount of
the sandbox gives it. Only a path the policy does not let the shell write
counts: a refusal inside the workspace is not the sandbox's.
"""

from __future__ import annotations

import os
import re

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox.mounts import allows_write
from bashrpc.server.runtime.seam.policy import Policy

_REASONS = "read-only file system|EROFS"
# A path as tools print it: quoted (ASCII or typographic quotes), or a bare word.
# No quoted path holds its own opening quote: a scan from each opening quote then
# ends at the next one, so a line is read in linear time (the output is the
# command's, read on the event loop; `‘‘‘…` once took seconds).
_QUOTED = r"""'([^'\n]+)'|"([^"\n]+)"|‘([^‘’\n]+)’"""
# `touch: cannot touch 'x': Read-only file system`, `bash: x: Read-only file system`:
# the path right before the reason (not the program's name at the start), quoted,
# or a bare word that is a whole field: not the last word of `write of /x failed`.
_BEFORE = re.compile(rf"(?:{_QUOTED}|(?:^|: )([^\s:'\"‘’]+)): (?:{_REASONS})", re.I)
# `OSError: [Errno 30] Read-only file system: '/x'`, `EROFS: ..., open '/x'`: after it.
_AFTER = re.compile(rf"(?:{_REASONS})(?::|,\s*\w+)\s*(?:{_QUOTED})", re.I)


def denied_path(output: str, exit_code: int | None, policy: Policy | None, cwd: str) -> str | None:
    """The last path the output says could not be written that the sandbox forbids."""
    if policy is None or not policy.confined or exit_code == 0:
        return None
    found = None
    for line in output.splitlines():
        for match in (*_BEFORE.finditer(line), *_AFTER.finditer(line)):
            text = next(group for group in match.groups() if group is not None)
            if text.isupper():
                continue  # an error code (`EROFS: read-only file system`), not a path
            path = os.path.normpath(os.path.join(cwd, os.path.expanduser(text)))
            if not allows_write(policy, path):
                found = path
    return found


def denial_notice(path: str, policy: Policy) -> str:
    writable = [*policy.writable, messages.SANDBOX_PRIVATE_TMP]
    return messages.SANDBOX_DENIED.format(mode=policy.mode, path=path, writable=", ".join(writable))
