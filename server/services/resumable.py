"""Requests a client may resume on another connection: their chunks, state and result.

Under the daemon, a tenant of a `clientId` keeps one `Resumable` per request
of its `bash` or `tools/call` (keyed by the id its client gave), owned by the
tenant, not the connection: the notifications the request sends are logged as
they are sent (`ChunkLog`; which ones, the request's `Logged` says), and its
result is kept when it ends, so a resume replays them with no knowledge of
their shapes. A PTY request holds the PTY's lane too, so a new connection of
the client reaches its input, size and screen. A tool call's result is kept
as a BashResult holding the tool result's text (`toolText`).
A record whose connection is still there at the end is dropped; one whose
connection was cut is kept, finished, until a `bash/attach` delivers its
result or the tenant ends.

An id is held by one record at a time: a new request whose id a record still
holds (a new connection counts from 1 again) runs as usual but is not
resumable, so the held output is never lost to it. So is one past the
tenant's count of kept records (`keptbudget.RecordCount`) once no finished
record can make way for it. What the records hold, across all tenants, is
bounded by the daemon's budget (`keptbudget.KeptBudget`): cut records give
way first, the one cut longest ago first.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashResult, RequestState
from bashrpc.server import errors
from bashrpc.server.observe.stats import STATS
from bashrpc.server.output.keptbudget import KeptBudget, RecordCount
from bashrpc.server.output.replay import (
    REPLAY_ATTACHED_MAX_BYTES,
    REPLAY_MAX_BYTES,
    ChunkLog,
)
from bashrpc.server.pulse import Pulse
from bashrpc.server.runtime.run.ptylane import PtyLane

# How a resumed notification is sent: its method and params, as first sent.
Send = Callable[[str, msgspec.Struct], Awaitable[None]]
# The first notification replayed after a gap, saying that `notice` is missed.
GapNotice = Callable[[msgspec.Struct, str], msgspec.Struct]


class Logged(msgspec.Struct, frozen=True):
    """What a request's record keeps of the notifications it sends."""

    # The methods logged; None: every one.
    methods: frozenset[str] | None = None
    # How a replay that lost its start says so in its first notification; None:
    # the gap in seq tells (raw terminal bytes, which `pty/screen` shows whole).
    on_gap: GapNotice | None = None


# A record that keeps every notification its request sends.
EVERY = Logged()


class Resumable:
    def __init__(
        self,
        request_id: Any,
        method: str,
        session_id: str,
        owner: object,
        lane: PtyLane | None,
        logged: Logged,
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.session_id = session_id
        self.logged = logged
        # A PTY request's control side; None on pipes.
        self.lane = lane
        # The connection that started it; None once that one is cut.
        self.owner: object | None = owner
        self.log = ChunkLog(REPLAY_ATTACHED_MAX_BYTES)
        self.result: BashResult | None = None
        # Set when the request ended without a result (its error went to its connection).
        self.failed = False
        # Queued until its command has the session's turn.
        self.state: RequestState = "queued"
        # The request's own cancel, as on its connection: for an abort from another.
        self.cancel: Callable[[], bool] | None = None
        self._changed = Pulse()
        # What its kept result holds, as counted by the budget.
        self.result_bytes = 0
        # The records that keep it; None while it is not kept.
        self.home: Resumables | None = None

    @property
    def finished(self) -> bool:
        return self.state == "finished"

    def begin(self) -> None:
        """Its command has the session's turn: it runs."""
        if self.state == "queued":
            self.state = "running"

    def trim(self, excess: int) -> None:
        self.log.trim(excess)

    def evict(self) -> None:
        if self.home is not None:
            self.home.drop(self)

    @property
    def pty(self) -> bool:
        """Its output is `pty/output` (raw bytes), not `bash/chunk`."""
        return self.lane is not None

    def sent(self, method: str, params: msgspec.Struct) -> None:
        """The request sent this notification: logged, if it is one its record keeps."""
        methods = self.logged.methods
        if methods is None or method in methods:
            self.log.add(method, params)
            self.poke()

    def poke(self) -> None:
        self._changed.fire()

    async def changed(self) -> None:
        await self._changed.wait()


class Resumables:
    """One client's records in a tenant, by request id."""

    def __init__(self, budget: KeptBudget | None = None, count: RecordCount | None = None) -> None:
        self._budget = KeptBudget() if budget is None else budget
        self._count = RecordCount() if count is None else count
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
        logged: Logged = EVERY,
    ) -> Resumable:
        """A record for a new request; not kept when its id is still held, or
        when the tenant keeps its most and none of ours has finished."""
        record = Resumable(request_id, method, session_id, owner, lane, logged)
        if request_id is None or request_id in self.records:
            return record
        if self._count.full:
            oldest = next((r for r in self.records.values() if r.finished), None)
            if oldest is not None:
                self.drop(oldest)
        if self._count.full:
            return record
        self.records[request_id] = record
        self._count.kept += 1
        record.home = self
        record.log.meter = self._budget.charge
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
        elif record.home is self:
            record.result_bytes = len(msgspec.json.encode(result))
            self._budget.charge(record.result_bytes)

    def drop(self, record: Resumable) -> None:
        if self.records.get(record.request_id) is record:
            del self.records[record.request_id]
            self._count.kept -= 1
            record.home = None
            record.log.meter = None
            self._budget.release(record, record.log.bytes + record.result_bytes)

    def cut(self, owner: object) -> None:
        """`owner`'s connection is gone: its requests wait for a new one."""
        self._cut.add(owner)
        for record in self.records.values():
            if record.owner is owner:
                record.owner = None
                record.log.max_bytes = REPLAY_MAX_BYTES
                if record.home is self:
                    self._budget.cut(record)
            # An attach on that connection stops waiting.
            record.poke()

    def abort(self, request_id: Any) -> bool:
        """Abort a request still running whose connection was cut, as an abort on
        that connection would (its result, kept, says cancelled)."""
        record = self.records.get(request_id)
        if record is None or record.owner is not None or record.finished:
            return False
        return record.cancel is not None and record.cancel()

    @property
    def bytes_held(self) -> int:
        """Output held for resumes, across this client's records."""
        return sum(record.log.bytes_held for record in self.records.values())

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
        self,
        record: Resumable,
        after_seq: int,
        owner: object,
        send: Send,
        accept_gap: bool = False,
    ) -> BashResult:
        """Send the notifications after `after_seq`, kept then live, as they were
        first sent, and give the result at the end; cancelled if `owner` (the
        attaching connection) is cut first. Notifications after `after_seq` no
        longer kept refuse the resume (ResumeGap) unless `accept_gap`; then the
        first one sent says how many were missed, where its request says how."""
        missed = record.log.after(after_seq).missed
        STATS.resumed(gap=missed > 0)
        if missed and not accept_gap:
            raise errors.ResumeGap(record.request_id, after_seq, record.log.first_kept, missed)
        seen = after_seq
        while True:
            replay = record.log.after(seen)
            on_gap = record.logged.on_gap
            if replay.missed and on_gap is not None:
                first = replay.chunks[0]
                notice = messages.NOTICE_RESUME_MISSED.format(count=replay.missed)
                params = on_gap(first.params, notice)
                replay.chunks[0] = msgspec.structs.replace(first, params=params)
            for chunk in replay.chunks:
                await send(chunk.method, chunk.params)
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
