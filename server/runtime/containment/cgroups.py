"""cgroup v2 groups: one per shell, below one per server, where the machine allows.

A cgroup keeps every process forked inside it, whatever the process does to
its session, its parentage or its environment; freezing it stops them all
at once, and `cgroup.kill` ends them all at once. So where the server may
create groups (its own cgroup is writable: root, or a systemd-delegated
scope), this is how it knows what a shell started.
"""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path

from bashrpc.server import log

GROUP_PREFIX = "bashrpc-"
_log = log.get("cgroups")
_names = itertools.count(1)


def cgroup2_mount() -> Path | None:
    """Where cgroup v2 is mounted, if it is."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                # ... mount-point ... - fstype source options
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return Path(left.split(" ")[4])
    except OSError:
        return None
    return None


def own_cgroup() -> Path | None:
    """The directory of this process's cgroup v2, if v2 is mounted."""
    mount = cgroup2_mount()
    return None if mount is None else group_of(os.getpid(), mount)


def group_of(pid: int, mount: Path) -> Path | None:
    """The directory of a process's cgroup v2 (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return mount / line[3:].strip().lstrip("/")
    except OSError:
        return None
    return None


class Cgroup:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._procs = str(path / "cgroup.procs")

    def join_from_child(self) -> None:
        """Move the calling process here; runs between fork and exec."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)

    def add(self, pid: int) -> bool:
        """Move a running process here, from outside it."""
        return self._write("cgroup.procs", str(pid).encode())

    def procs(self) -> set[int]:
        """Live processes in this group and below (zombies have left it)."""
        out: set[int] = set()
        for directory, _dirs, _files in os.walk(self.path):
            try:
                with open(os.path.join(directory, "cgroup.procs"), "rb") as f:
                    out.update(int(p) for p in f.read().split())
            except OSError:
                continue
        return out

    def _write(self, name: str, value: bytes) -> bool:
        try:
            with open(self.path / name, "wb") as f:
                f.write(value)
            return True
        except OSError:
            return False

    def _event(self, key: str) -> bool:
        try:
            text = (self.path / "cgroup.events").read_text()
        except OSError:
            return False
        return f"{key} 1" in text.splitlines()

    def freeze(self, frozen: bool) -> bool:
        return self._write("cgroup.freeze", b"1" if frozen else b"0")

    @property
    def frozen(self) -> bool:
        return self._event("frozen")

    @property
    def populated(self) -> bool:
        return self._event("populated")

    def kill(self) -> bool:
        """SIGKILL everything in the group and below, atomically."""
        return self._write("cgroup.kill", b"1")

    def remove(self) -> bool:
        """Remove the (empty) group and any empty groups below it."""
        for directory, dirs, _files in os.walk(self.path, topdown=False):
            for name in dirs:
                try:
                    os.rmdir(os.path.join(directory, name))
                except OSError:
                    pass
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            return True
        except OSError as exc:
            _log.debug("cgroup %s not removed: %s", self.path, exc)
            return False
        return True


class CgroupRoot(Cgroup):
    """The server's own group: `bashrpc-<pid>-<n>` beside the server, never holding it."""

    @classmethod
    def create(cls) -> CgroupRoot | None:
        """A fresh group, or None (with the reason logged) where groups can't be made."""
        parent = own_cgroup()
        if parent is None:
            _log.info("no cgroup v2 here; shells are tracked by ancestry")
            return None
        _sweep_stale(parent)
        path = parent / f"{GROUP_PREFIX}{os.getpid()}-{next(_names)}"
        try:
            path.mkdir()
        except OSError as exc:
            _log.info("cannot create a cgroup in %s (%s); tracking by ancestry", parent, exc)
            return None
        root = cls(path)
        if not (path / "cgroup.kill").exists() or not (path / "cgroup.freeze").exists():
            _log.info("cgroup v2 here lacks cgroup.kill or cgroup.freeze; tracking by ancestry")
            root.remove()
            return None
        return root

    def nested(self, name: str) -> CgroupRoot | None:
        """A root of its own inside this one (a daemon's connection), killed with it."""
        group = self.child(name)
        return None if group is None else CgroupRoot(group.path)

    def child(self, name: str) -> Cgroup | None:
        path = self.path / name
        try:
            path.mkdir()
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                _log.warning("cannot create cgroup %s: %s", path, exc)
                return None
        return Cgroup(path)


def _sweep_stale(parent: Path) -> None:
    """Remove empty groups left by servers that died with their watchdog."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(GROUP_PREFIX):
            continue
        owner = name[len(GROUP_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            Cgroup(parent / name).remove()
