"""Telling a write the sandbox refused from any other failure (pure).

A model that sees `Read-only file system` retries in circles; told that the
sandbox refused the path, it can ask the user instead. Only failed commands
are read, only the lines where a tool reported EROFS or EACCES, and only a
path the policy does not let the shell write counts: a denial inside the
workspace is the file's own permissions, not the sandbox.
"""

from __future__ import annotations

import os
import re

from protocol import messages
from server.runtime.sandbox import Policy

_MARKERS = re.compile(r"read-only file system|permission denied|\bEROFS\b|\bEACCES\b", re.I)
# Paths as tools print them: quoted (ASCII or typographic quotes), or bare and absolute.
_PATHS = re.compile(r"""'([^'\n]+)'|"([^"\n]+)"|‘([^’\n]+)’|(?<![\w.])(/[^\s:'",]+)""")


def denied_path(output: str, exit_code: int | None, policy: Policy | None, cwd: str) -> str | None:
    """The last path the output says could not be written that the sandbox forbids."""
    if policy is None or not policy.confined or exit_code == 0:
        return None
    found = None
    for line in output.splitlines():
        if not _MARKERS.search(line):
            continue
        for match in _PATHS.finditer(line):
            text = next(group for group in match.groups() if group is not None)
            path = os.path.normpath(os.path.join(cwd, os.path.expanduser(text)))
            if not policy.allows_write(path):
                found = path
    return found


def denial_notice(path: str, policy: Policy) -> str:
    writable = [*policy.writable, messages.SANDBOX_PRIVATE_TMP]
    return messages.SANDBOX_DENIED.format(mode=policy.mode, path=path, writable=", ".join(writable))
