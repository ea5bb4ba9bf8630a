"""A replay's fixture: a folder copied in as the workspace, bounded and plain.

A transcript is a file anyone can hand over, so its header's fixture is held
to the transcript's own folder (links resolved), and what is copied is only
regular files and directories, never followed through a link, up to a bound:
`/proc/self`, a FIFO or a link to the host's files is refused, not copied.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from bashrpc.protocol import messages

MAX_FIXTURE_ENTRIES = 10_000
MAX_FIXTURE_BYTES = 256 * 1024 * 1024


class FixtureError(ValueError):
    """A fixture that is not copied; the message says why."""


def inside(folder: Path, name: str) -> Path | None:
    """`name` resolved against `folder`, when it lies in that folder or below it."""
    base = folder.resolve()
    target = (base / name).resolve()
    return target if target == base or base in target.parents else None


def plan(source: Path) -> list[tuple[str, bool]]:
    """Every entry below `source`, as (relative path, is a directory), parents
    first; FixtureError for anything else or past the bound."""
    entries: list[tuple[str, bool]] = []
    total = 0
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            with os.scandir(source / relative) as listing:
                found = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            raise FixtureError(f"{relative or '.'}: {exc.strerror}") from None
        for entry in found:
            path = os.path.join(relative, entry.name)
            if entry.is_dir(follow_symlinks=False):
                pending.append(path)
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
            else:
                raise FixtureError(messages.FIXTURE_NOT_PLAIN.format(entry=path))
            entries.append((path, entry.is_dir(follow_symlinks=False)))
            if len(entries) > MAX_FIXTURE_ENTRIES or total > MAX_FIXTURE_BYTES:
                raise FixtureError(
                    messages.FIXTURE_TOO_BIG.format(
                        entries=MAX_FIXTURE_ENTRIES, size=MAX_FIXTURE_BYTES
                    )
                )
    return entries


def copy_fixture(source: Path, target: Path) -> None:
    """`source`'s plain entries into the new directory `target`; a file that
    became anything else since the plan is refused (opened without following)."""
    entries = plan(source)
    target.mkdir()
    for relative, is_dir in entries:
        if is_dir:
            (target / relative).mkdir()
            continue
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(source / relative, flags)
        except OSError as exc:
            raise FixtureError(f"{relative}: {exc.strerror}") from None
        with open(fd, "rb") as reader:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise FixtureError(messages.FIXTURE_NOT_PLAIN.format(entry=relative))
            with open(target / relative, "wb") as writer:
                shutil.copyfileobj(reader, writer)
            os.chmod(target / relative, stat.S_IMODE(mode))
