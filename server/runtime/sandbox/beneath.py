"""The host side's way to what a sandboxed command could have written: no
symlink in a writable root is followed, no `..` is taken lexically, and only a
regular file is read, without blocking, and bounded.

Python binds no `openat2` (`RESOLVE_NO_SYMLINKS`): the walk goes one component
at a time from a directory's descriptor, each opened `O_NOFOLLOW`, so no
component can be swapped for a link between its check and its use, and `..`
is the parent of the directory reached, as the kernel takes it. A symlink
outside every root is the host's own (a dotfiles `~/.gitconfig`): a sandbox
cannot write it, and it is followed.

A FIFO, a device, a socket or an oversized file where git expects a small
file is `Hostile`: opening one never blocks (`O_NONBLOCK`), and nothing is
read from it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence

DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# What `O_NOFOLLOW` (ELOOP) and `O_DIRECTORY` (ENOTDIR) answer a link.
_LINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)
# How many of the host's own links one walk may pass (the kernel allows 40).
MAX_HOST_LINKS = 40


class Hostile(Exception):
    """Not what git expects there: a link in a root, a FIFO, a device, a socket,
    a directory, or a file over its size."""


class Oversized(Hostile):
    """A regular file over the size it may be read at."""


def steps(base: str, path: str) -> tuple[str, ...]:
    """The components walked from `/` to `path` (absolute, or taken in `base`,
    absolute), `..` kept as a step of its own (pure)."""
    joined = path if os.path.isabs(path) else os.path.join(base, path)
    return tuple(part for part in joined.split("/") if part not in ("", "."))


def within_any(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def directory(path: str, roots: Sequence[str], base: str = "/") -> str | None:
    """Where the directory `path` (taken in `base`) is, as walked: its path with
    no link and no `..` in it; None when it is missing, is not a directory, or
    the way passes a link inside `roots`."""
    opened = open_directory(path, roots, base)
    if opened is None:
        return None
    os.close(opened[0])
    return opened[1]


def open_directory(path: str, roots: Sequence[str], base: str = "/") -> tuple[int, str] | None:
    """`directory`, with an `O_PATH` descriptor of it (for `*at` calls), which the
    caller closes."""
    try:
        return _walk(steps(base, path), roots, 0)
    except (OSError, Hostile):
        return None


def read(path: str, roots: Sequence[str], limit: int) -> bytes | None:
    """The content of the regular file at `path` (absolute), at most `limit`
    bytes of it; None when it is missing. Raises Hostile for anything else
    there, or a file over `limit`."""
    fd = open_file(path, roots, limit)
    if fd is None:
        return None
    try:
        return _read_all(fd, limit)
    finally:
        os.close(fd)


def first_link(path: str, roots: Sequence[str]) -> str | None:
    """The first component of `path` (absolute, taken as written) that is a link
    inside `roots`: where a command could point what `path` names elsewhere."""
    where = "/"
    for part in steps("/", path):
        where = os.path.dirname(where) if part == ".." else os.path.join(where, part)
        try:
            is_link = stat.S_ISLNK(os.lstat(where).st_mode)
        except OSError:
            return None
        if is_link and within_any(where, roots):
            return where
    return None


def open_file(path: str, roots: Sequence[str], limit: int) -> int | None:
    """A descriptor of the regular file at `path` (absolute, at most `limit`
    bytes), which the caller closes; None when it is missing. Raises Hostile."""
    parent, name = os.path.split(path)
    try:
        dir_fd, where = _walk(steps("/", parent), roots, 0)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise Hostile(str(exc)) from exc
    try:
        fd = _open_file(dir_fd, where, name, roots)
    finally:
        os.close(dir_fd)
    if fd is None:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Hostile(f"{path}: not a regular file")
    if info.st_size > limit:
        os.close(fd)
        raise Oversized(f"{path}: over {limit} bytes")
    return fd


def open_followed(path: str, roots: Sequence[str], limit: int) -> int | None:
    """What git opens at `path` (an index, a config): its links followed, as git
    follows them, then walked to as `open_file` does; None when it is missing or
    no regular file (git reads nothing from a FIFO, and nothing it can use from a
    device). Raises Oversized: git would read that one whole."""
    try:
        return open_file(os.path.realpath(path), roots, limit)
    except Oversized:
        raise
    except Hostile:
        return None


def _open_file(dir_fd: int, where: str, name: str, roots: Sequence[str]) -> int | None:
    full = os.path.join(where, name)
    try:
        return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP or within_any(full, roots):
            raise Hostile(f"{full}: {exc.strerror}") from exc
    # The host's own link, outside every root: taken as the host has it.
    return _host_link_file(full, roots)


def _host_link_file(full: str, roots: Sequence[str]) -> int | None:
    """The file a host's link names, the way to it walked again."""
    target = os.path.realpath(full)
    if target == full:
        raise Hostile(f"{full}: a link that loops")
    parent, name = os.path.split(target)
    try:
        dir_fd, _ = _walk(steps("/", parent), roots, 1)
    except OSError:
        return None
    try:
        return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Hostile(f"{target}: {exc.strerror}") from exc
    finally:
        os.close(dir_fd)


def _walk(parts: Sequence[str], roots: Sequence[str], links: int) -> tuple[int, str]:
    """A descriptor of the directory `parts` lead to from `/`, and its path."""
    fd = os.open("/", DIR_FLAGS)
    where = "/"
    try:
        for part in parts:
            after = os.path.dirname(where) if part == ".." else os.path.join(where, part)
            try:
                step = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in _LINK_ERRORS or part == ".." or not _is_link(fd, part):
                    raise
                if within_any(after, roots) or links >= MAX_HOST_LINKS:
                    raise Hostile(f"{after}: a link") from exc
                # The host's own link, outside every root.
                step, after = _walk(steps("/", os.path.realpath(after)), roots, links + 1)
            os.close(fd)
            fd, where = step, after
    except BaseException:
        os.close(fd)
        raise
    return fd, where


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
