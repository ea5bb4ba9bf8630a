"""The root every server's artifacts live under, one directory per workspace, and
under the daemon one per tenant of a workspace.

Names and a scan only; the store (`artifacts.py`) writes, reads and evicts.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

import msgspec

from bashrpc.protocol.methods import ARTIFACT_ID_MAX_DIGITS

SUFFIX = ".bash.log"
ARTIFACT_NAME = re.compile(rf"^(\d{{1,{ARTIFACT_ID_MAX_DIGITS}}})\.bash\.log$")
# A workspace directory is named `<base name>-<hash of the path>`: readable, and unique.
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KEY_NAME_CHARS = 40
_KEY_HASH_CHARS = 16


def default_root() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "bashrpc" / "artifacts"


def workspace_key(workspace: Path | str) -> str:
    """The name of a workspace's directory under the root; the same for every server."""
    path = os.path.abspath(os.fspath(workspace))
    return _named(os.path.basename(path), path)


def owner_key(workspace: Path | str, owner: str | None) -> str:
    """The name of the directory of `owner`'s artifacts in a workspace (None: the
    workspace's own, which its stdio servers share); a sibling of the workspace's,
    so one scan of the root sees them all."""
    key = workspace_key(workspace)
    return key if owner is None else f"{key}.{_named(owner, owner)}"


def _named(name: str, unique: str) -> str:
    """`<name, made safe>-<hash of unique>`: readable, and unique."""
    digest = hashlib.sha256(unique.encode("utf-8", "surrogateescape")).hexdigest()
    readable = _KEY_UNSAFE.sub("_", name)[:_KEY_NAME_CHARS].strip("._")
    return f"{readable or 'root'}-{digest[:_KEY_HASH_CHARS]}"


class Entry(msgspec.Struct, frozen=True):
    path: Path
    size: int
    mtime_ns: int
    artifact_id: int

    @property
    def age_order(self) -> tuple[int, int]:
        """Oldest first; the id breaks ties of the file system's coarse clock."""
        return (self.mtime_ns, self.artifact_id)


def scan(root: Path) -> list[Entry]:
    """Every artifact under the root: each workspace's, and any left at the top
    by a version that kept one flat directory."""
    try:
        with os.scandir(root) as entries:
            directories = [
                root,
                *(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)),
            ]
    except OSError:
        return []
    out = []
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = ARTIFACT_NAME.match(name)
            if match is None:
                continue
            path = directory / name
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(Entry(path, st.st_size, st.st_mtime_ns, int(match.group(1))))
    return out
