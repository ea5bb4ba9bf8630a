"""Requests a client may resume on another connection: their chunks, state and result.

Under the daemon, a tenant of a `clientId` keeps one `Resumable` per request
of its `bash` (keyed by the id its client gave), owned by the tenant, not the
connection: the command's chunks are logged as they are sent (`ChunkLog`),
and its result is kept when it ends. A PTY request is one too: what it logs
is its `pty/output`s (their base64 data, as sent), and it holds the PTY's
lane, so a new connection of the client reaches its input, size and screen.
A record whose connection is still there at the end is dropped; one whose
connection was cut is kept, finished, until a `bash/attach` delivers its
result or the tenant ends.

An id is held by one record at a time: a new request whose id a record still
holds (a new connection counts from 1 again) runs as usual but is not
resumable, so the held output is never lost to it.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashResult, RequestState
from bashrpc.server import errors
from bashrpc.server.output.replay import (
    REPLAY_ATTACHED_MAX_BYTES,
    REPLAY_MAX_BYTES,
    Chunk,
    ChunkLog,
)
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.run.ptylane import PtyLane

# How a resumed chunk is sent: seq, text, skipped (as `ChunkStream` emits them).
SendChunk = Callable[[int, str, int], Awaitable[None]]
# Finished records kept for a client that has not come back; the oldest go first.
MAX_FINISHED_RECORDS = 64


class Resumable:
    def __init__(
        self, request_id: Any, method: str, session_id: str, owner: object, lane: PtyLane | None
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.session_id = session_id
        # A PTY request's control side; None on pipes.
        self.lane = lane
        # The connection that started it; None once that one is cut.
        self.owner: object | None = owner
        self.log = ChunkLog(REPLAY_ATTACHED_MAX_BYTES)
        self.result: BashResult | None = None
        # Set when the request ended without a result (its error went to its connection).
        self.failed = False
        self.state: RequestState = "running"
        # The request's own cancel, as on its connection: for an abort from another.
        self.cancel: Callable[[], bool] | None = None
        self._changed = Pulse()

    @property
    def pty(self) -> bool:
        """Its output is `pty/output` (raw bytes), not `bash/chunk`."""
        return self.lane is not None

    def add(self, seq: int, text: str, skipped: int) -> None:
        self.log.add(seq, text, skipped)
        self.poke()

    def poke(self) -> None:
        self._changed.fire()

    async def changed(self) -> None:
        await self._changed.wait()


class Resumables:
    """One tenant's records, by request id."""

    def __init__(self) -> None:
        self.records: dict[Any, Resumable] = {}
        # Connections that were cut: an attach they made stops.
        self._cut: weakref.WeakSet[Any] = weakref.WeakSet()

    def start(
        self,
        request_id: Any,
        method: str,
        session_id: str,
        owner: object,
        lane: PtyLane | None = None,
    ) -> Resumable:
        """A record for a new request; not kept when its id is still held."""
        record = Resumable(request_id, method, session_id, owner, lane)
        if request_id is not None and request_id not in self.records:
            self.records[request_id] = record
        return record

    def end(self, record: Resumable, result: BashResult | None) -> None:
        """The request ended: keep the record only for a client that was cut off."""
        record.result = result
        record.failed = result is None
        record.state = "finished"
        record.cancel = None
        record.poke()
        if record.owner is not None or result is None:
            self.drop(record)
        else:
            self._bound()

    def drop(self, record: Resumable) -> None:
        if self.records.get(record.request_id) is record:
            del self.records[record.request_id]

    def cut(self, owner: object) -> None:
        """`owner`'s connection is gone: its requests wait for a new one."""
        self._cut.add(owner)
        for record in self.records.values():
            if record.owner is owner:
                record.owner = None
                record.log.max_bytes = REPLAY_MAX_BYTES
            # An attach on that connection stops waiting.
            record.poke()

    def abort(self, request_id: Any) -> bool:
        """Abort a request still running whose connection was cut, as an abort on
        that connection would (its result, kept, says cancelled)."""
        record = self.records.get(request_id)
        if record is None or record.owner is not None or record.state != "running":
            return False
        return record.cancel is not None and record.cancel()

    def _bound(self) -> None:
        finished = [r for r in self.records.values() if r.state == "finished"]
        for record in finished[: max(0, len(finished) - MAX_FINISHED_RECORDS)]:
            self.drop(record)

    def find(self, request_id: Any) -> Resumable:
        record = self.records.get(request_id)
        if record is None:
            raise errors.InvalidArgument(messages.NO_SUCH_RESUMABLE.format(request_id=request_id))
        return record

    def lane(self, request_id: Any) -> PtyLane | None:
        """The PTY of a request still running, for a connection other than its own."""
        record = self.records.get(request_id)
        if record is None or record.lane is None or record.lane.closed:
            return None
        return record.lane

    async def follow(
        self, record: Resumable, after_seq: int, owner: object, send: SendChunk
    ) -> BashResult:
        """Send the chunks after `after_seq`, kept then live, and give the result at
        the end; cancelled if `owner` (the attaching connection) is cut first."""
        seen = after_seq
        while True:
            replay = record.log.after(seen)
            # Raw terminal bytes take no notice: the gap in seq tells, and
            # `pty/screen` shows the screen now.
            if replay.missed and not record.pty:
                first = replay.chunks[0]
                notice = messages.NOTICE_RESUME_MISSED.format(count=replay.missed)
                replay.chunks[0] = Chunk(first.seq, notice + first.text, first.skipped, 0)
            for chunk in replay.chunks:
                await send(chunk.seq, chunk.text, chunk.skipped)
                seen = chunk.seq
            if seen + 1 < record.log.next_seq:
                continue  # more came while those were sent
            if record.state == "finished":
                break
            if owner in self._cut:
                raise errors.RequestCancelled()
            await record.changed()
        if record.result is None:
            raise errors.InvalidArgument(
                messages.RESUMED_REQUEST_FAILED.format(request_id=record.request_id)
            )
        if owner not in self._cut:
            self.drop(record)
        return record.result
