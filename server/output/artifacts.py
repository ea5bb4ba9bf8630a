"""Numbered artifact files holding the full output of long commands.

Files are ``<id>.bash.log`` (0600) in a private directory (0700) of their
owner's, under one root shared by every server of the machine: on stdio the
workspace's (several servers may share a workspace), under the daemon one
tenant's of the workspace (`owner`), so a connection lists and reads only
its own tenant's. Ids count per directory and never repeat there
(`artifactids.py`: a counter file under a lock, and O_EXCL). A reset of
every session (`clear`) removes the owner's artifacts: all of a tenant's
directory, or, in a workspace's that other servers share, those this store
made. Reads
open by number with O_NOFOLLOW, so no id, and no symlink planted in the
directory, can reach a file elsewhere.

The size caps hold while a command writes, not just when it ends: before
each write the store makes room by deleting the oldest finished artifacts,
and an artifact that would still pass the total cap, or its own, is cut
right there and written no further (the result says so; the in-memory tail
is complete as always). The total cap spans the whole root, so the oldest
artifacts go first whichever workspace they belong to. A runaway `yes`
cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

import msgspec

from bashrpc.protocol import messages
from bashrpc.server import log
from bashrpc.server.errors import ArtifactNotFound
from bashrpc.server.output import artifactids, artifactroot, utf8

DEFAULT_MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
SUFFIX = artifactroot.SUFFIX
_NAME = artifactroot.ARTIFACT_NAME
# Writes are gathered until this much waits, then written in one `writev`.
_WRITE_BUFFER_BYTES = 256 * 1024
# At most this many pieces in one `writev` (the kernel takes up to IOV_MAX, 1024).
_WRITE_BUFFER_PIECES = 64

# Past this many ids made (and then past twice as many as are left), those no
# longer on disk (evicted) are forgotten.
_MADE_PRUNED_PAST = 4096

_log = log.get("artifacts")


class ArtifactWriter:
    """The spill target of one command; stops quietly on the first I/O error.

    Writes are gathered by reference, not copied, and go out together in one
    `writev`: a chatty command costs few syscalls, and a fast one's bytes are
    copied by nobody but the kernel.
    """

    def __init__(self, store: ArtifactStore, artifact_id: int, fd: int) -> None:
        self.id = artifact_id
        self._store = store
        self._fd = fd
        # Pieces waiting (immutable bytes, so holding them is safe) and their size.
        self._pieces: list[bytes] = []
        self._waiting = 0
        self.size = 0
        self.failed = False
        self.closed = False
        # Stopped at a size cap: complete up to there, nothing after.
        self.cut = False

    def write(self, data: bytes) -> None:
        if self.failed or self.cut or not data:
            return
        self._pieces.append(bytes(data) if type(data) is not bytes else data)
        self._waiting += len(data)
        if self._waiting >= _WRITE_BUFFER_BYTES or len(self._pieces) >= _WRITE_BUFFER_PIECES:
            self._flush()

    def _flush(self) -> None:
        pieces, wanted = self._pieces, self._waiting
        self._pieces, self._waiting = [], 0
        allowed = self._store.make_room(self, wanted)
        if allowed < wanted:
            self.cut = True
            pieces = _first_bytes(pieces, allowed)
        try:
            while pieces:
                written = os.writev(self._fd, pieces)
                self.size += written
                self._store.account(written)
                pieces = _after(pieces, written)
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        """Write what waits now: a reader of the file is about to look."""
        if self._pieces and not self.failed and not self.cut and not self.closed:
            self._flush()

    def close(self) -> int | None:
        """Finish the file; the id when it is complete, else None."""
        if self.closed:
            return None if self.failed else self.id
        self.closed = True
        if self._pieces and not self.failed and not self.cut:
            self._flush()
        if not self.failed:
            try:
                os.close(self._fd)
            except OSError as exc:
                self._fail(exc)
        if self.failed:
            return None
        self._store.finished(self)
        return self.id

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        _log.warning(messages.ARTIFACT_WRITE_FAILED.format(id=self.id, reason=exc))
        try:
            os.close(self._fd)
        except OSError:
            pass
        self._store.remove(self.id)
        self._store.finished(self)


def _first_bytes(pieces: list[bytes], size: int) -> list[bytes]:
    """The pieces that make up the first `size` bytes, the last one cut."""
    out: list[bytes] = []
    for piece in pieces:
        if size <= 0:
            break
        out.append(piece if len(piece) <= size else piece[:size])
        size -= len(piece)
    return out


def _after(pieces: list[bytes], written: int) -> list[bytes]:
    """What is left of `pieces` once `written` bytes of them went out."""
    for index, piece in enumerate(pieces):
        if written < len(piece):
            rest = pieces[index:]
            rest[0] = piece[written:]
            return rest
        written -= len(piece)
    return []


class ArtifactChunk(msgspec.Struct, frozen=True):
    data: bytes
    offset: int
    next_offset: int | None
    total_bytes: int


class ArtifactStore:
    def __init__(
        self,
        root: Path,
        workspace: Path | str,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        max_bytes: int | None = None,
        owner: str | None = None,
    ):
        self.root = root
        self.directory = root / artifactroot.owner_key(workspace, owner)
        # The workspace's directory is shared by its servers; an owner's is its alone.
        self.shared = owner is None
        self.max_total_bytes = max_total_bytes
        # The cap of one artifact; None: only the total cap applies.
        self.max_bytes = max_bytes
        self._next_id: int | None = None
        self._usable: bool | None = None
        # Bytes under the root as this store knows them; rescanned when over.
        self._total = 0
        self._writing: set[int] = set()
        # The ids this store made, while they may still be on disk (see `clear`).
        self._made: set[int] = set()
        self._prune_made_at = _MADE_PRUNED_PAST
        # Still being written when `clear` ran: removed as soon as they are finished.
        self._doomed: set[int] = set()

    def _prepare(self) -> bool:
        """Create the directory on first use, so a server that never spills never touches disk."""
        if self._usable is None:
            try:
                for directory in (self.root, self.directory):
                    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                    os.chmod(directory, 0o700)
                self._next_id = max(self.ids(), default=0) + 1
                self._total = sum(entry.size for entry in artifactroot.scan(self.root))
                self._usable = True
            except OSError as exc:
                _log.warning(
                    messages.ARTIFACTS_DIR_UNUSABLE.format(path=self.directory, reason=exc)
                )
                self._usable = False
        return self._usable

    def path(self, artifact_id: int) -> Path:
        return self.directory / f"{int(artifact_id)}{SUFFIX}"

    def ids(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _NAME.match(n)))

    def create(self) -> ArtifactWriter | None:
        if not self._prepare():
            return None
        assert self._next_id is not None
        try:
            artifact_id, fd = artifactids.create(self.directory, self._next_id)
        except artifactids.IdsExhausted:
            _log.warning(messages.ARTIFACT_IDS_EXHAUSTED.format(path=self.directory))
            return None
        except OSError as exc:
            _log.warning(messages.ARTIFACT_CREATE_FAILED.format(path=self.directory, reason=exc))
            return None
        self._next_id = artifact_id + 1
        self._writing.add(artifact_id)
        if self.shared:
            if len(self._made) >= self._prune_made_at:
                self._made &= set(self.ids())
                self._prune_made_at = max(_MADE_PRUNED_PAST, 2 * len(self._made))
            self._made.add(artifact_id)
        return ArtifactWriter(self, artifact_id, fd)

    def remove(self, artifact_id: int) -> None:
        self._unlink(self.path(artifact_id))

    def clear(self) -> int:
        """Remove the owner's artifacts (every one in its own directory; in a shared
        one, those this store made); how many went now. One still being written
        (a command aborted, not yet ended) goes as soon as it is finished."""
        ids = self._made if self.shared else set(self.ids())
        gone = 0
        for artifact_id in sorted(ids - self._writing):
            gone += self._unlink(self.path(artifact_id))
        self._doomed |= self._writing
        self._made &= self._writing
        return gone

    def discard(self) -> None:
        """An owner that is gone for good (a connection's own tenant): its directory
        goes with its artifacts, none of which anyone can ask for any more."""
        if self.shared:
            return
        self.clear()
        with contextlib.suppress(OSError):
            os.unlink(self.directory / artifactids.COUNTER_NAME)
            os.rmdir(self.directory)

    def _unlink(self, path: Path) -> bool:
        try:
            size = os.stat(path, follow_symlinks=False).st_size
            os.unlink(path)
        except OSError:
            return False
        self._total = max(0, self._total - size)
        return True

    def read(self, artifact_id: int, offset: int, limit: int) -> ArtifactChunk:
        """Read ``limit`` bytes at most, cut on UTF-8 character boundaries."""
        try:
            # O_NONBLOCK: a FIFO planted under an artifact's name must not hang the server.
            fd = os.open(
                self.path(artifact_id),
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
            )
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                raise ArtifactNotFound(artifact_id, self.ids()) from None
            raise
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ArtifactNotFound(artifact_id, self.ids())
            total = st.st_size
            start = min(offset, total)
            f.seek(start)
            # A few bytes past the limit show where the last character ends.
            window = f.read(limit + utf8.MAX_CONTINUATION_BYTES)
        # Past the start, a read cut into a character skips to the next; at the
        # start nothing precedes, so a byte there is the output's own.
        begin = utf8.char_start(window, 0) if start else 0
        end = min(limit, len(window))
        if start + end < total:
            while end > begin and utf8.is_continuation(window[end]):
                end -= 1
            if end == begin:
                # The limit is smaller than one character: return it whole.
                end = utf8.char_start(window, begin + 1)
        data = window[begin:end]
        real_offset = start + begin
        next_offset = real_offset + len(data)
        return ArtifactChunk(
            data=data,
            offset=real_offset,
            next_offset=next_offset if next_offset < total else None,
            total_bytes=total,
        )

    def sizes(self) -> list[tuple[int, int]]:
        """(id, size) of every artifact, oldest first."""
        out: list[tuple[int, int]] = []
        for artifact_id in self.ids():
            try:
                st = os.stat(self.path(artifact_id), follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append((artifact_id, st.st_size))
        return out

    def make_room(self, writer: ArtifactWriter, wanted: int) -> int:
        """How many of `wanted` bytes the writer may add, after deleting the
        oldest finished artifacts under the root if it would pass its cap."""
        allowed = wanted
        if self.max_bytes is not None:
            allowed = min(allowed, self.max_bytes - writer.size)
        if self._total + allowed > self.max_total_bytes:
            # Other servers share the root: start from what is there.
            entries = sorted(artifactroot.scan(self.root), key=lambda e: e.age_order)
            self._total = sum(entry.size for entry in entries)
            mine = {self.path(i) for i in self._writing}
            for entry in entries:
                if self._total + allowed <= self.max_total_bytes:
                    break
                if entry.path not in mine:
                    self._unlink(entry.path)
            allowed = min(allowed, self.max_total_bytes - self._total)
        return max(0, allowed)

    def account(self, written: int) -> None:
        self._total += written

    def finished(self, writer: ArtifactWriter) -> None:
        self._writing.discard(writer.id)
        if writer.id in self._doomed:
            self._doomed.discard(writer.id)
            self.remove(writer.id)
