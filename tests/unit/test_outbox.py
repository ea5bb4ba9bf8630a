"""The outbox's two lanes, on an in-memory stream whose reader the test controls."""

from __future__ import annotations

import anyio
import anyio.abc
from anyio import wait_all_tasks_blocked

from bashrpc.server.wire.outbox import CONTROL_MAX_BYTES, OUTBOX_MAX_BYTES, SLICE_BYTES, Outbox

LINE = b"x" * 1023 + b"\n"


async def _drain(receive: anyio.abc.ObjectReceiveStream[bytes], until: bytes) -> bytes:
    got = b""
    while not got.endswith(until):
        got += await receive.receive()
    return got


def test_control_lines_go_ahead_of_queued_bulk_and_bulk_keeps_its_order() -> None:
    async def main() -> bytes:
        send, receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await outbox.put(b"chunk-0\n")
            await wait_all_tasks_blocked()  # the writer holds chunk-0: the client reads nothing
            for line in (b"chunk-1\n", b"chunk-2\n", b"reply\n"):
                await outbox.put(line)
            await outbox.put_control(b"pong\n")
            got = await _drain(receive, b"reply\n")
            tg.cancel_scope.cancel()
        return got

    assert anyio.run(main) == b"chunk-0\npong\nchunk-1\nchunk-2\nreply\n"


def test_a_full_bulk_lane_never_holds_up_a_control_line() -> None:
    async def main() -> bool:
        send, _receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)

            async def flood() -> None:
                while True:
                    await outbox.put(LINE)

            tg.start_soon(flood)
            await wait_all_tasks_blocked()  # the flood waits for room
            with anyio.move_on_after(10) as waited:
                await outbox.put_control(b"pong\n")
            tg.cancel_scope.cancel()
        return waited.cancelled_caught

    assert anyio.run(main) is False


def test_the_control_lane_is_bounded_too() -> None:
    """A client that sends requests and never reads makes the reader wait, at a bound."""

    async def main() -> int:
        send, _receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        accepted = 0
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)

            async def pings() -> None:
                nonlocal accepted
                while True:
                    await outbox.put_control(LINE)
                    accepted += 1

            tg.start_soon(pings)
            await wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
        return accepted

    accepted = anyio.run(main)
    # One line in the writer's hands, the lane's bound, and the line that crossed it.
    assert accepted * len(LINE) <= CONTROL_MAX_BYTES + 2 * len(LINE)
    assert accepted * len(LINE) >= CONTROL_MAX_BYTES
    assert CONTROL_MAX_BYTES < OUTBOX_MAX_BYTES


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.split(b"\n")[:-1]]


async def _read_lines(receive: anyio.abc.ObjectReceiveStream[bytes], count: int) -> list[bytes]:
    got = b""
    with anyio.fail_after(10):
        while got.count(b"\n") < count:
            got += await receive.receive()
    return _lines(got)


def test_a_reply_waits_behind_one_slice_of_another_requests_backlog() -> None:
    chunk = b"b" * (16 * 1024 - 1) + b"\n"
    backlog = 40  # 640 KiB of request b's chunks, queued while the client reads nothing

    async def main() -> list[bytes]:
        send, receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        flood, quiet = object(), object()
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await outbox.put(chunk, flood)
            await wait_all_tasks_blocked()  # the writer holds b's first chunk
            for _ in range(backlog):
                await outbox.put(chunk, flood)
            await outbox.put(b"reply-a\n", quiet)
            lines = await _read_lines(receive, backlog + 2)
            tg.cancel_scope.cancel()
        return lines

    lines = anyio.run(main)
    position = lines.index(b"reply-a\n")
    # Behind the chunk the writer held, and at most one slice of the backlog.
    assert position * len(chunk) <= len(chunk) + SLICE_BYTES
    assert lines.count(chunk) == backlog + 1  # nothing of b lost or repeated


def test_lanes_are_served_round_robin_each_in_its_own_order() -> None:
    async def main() -> list[bytes]:
        send, receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        first, second = object(), object()
        big = SLICE_BYTES // 4
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await outbox.put(b"start\n")
            await wait_all_tasks_blocked()
            for i in range(12):
                await outbox.put(b"1" * big + b":%d\n" % i, first)
                await outbox.put(b"2" * big + b":%d\n" % i, second)
            lines = await _read_lines(receive, 25)
            tg.cancel_scope.cancel()
        return lines[1:]

    lines = anyio.run(main)
    ones = [line for line in lines if line.startswith(b"1")]
    twos = [line for line in lines if line.startswith(b"2")]
    assert [int(line.split(b":")[1]) for line in ones] == list(range(12))
    assert [int(line.split(b":")[1]) for line in twos] == list(range(12))
    # Interleaved by slices: neither lane's backlog goes out whole before the other starts.
    kinds = [line[:1] for line in lines]
    assert kinds.index(b"2") < kinds.index(b"1") + 8 and kinds.index(b"1") < 8


def test_a_flood_never_keeps_another_requests_line_out() -> None:
    async def main() -> bool:
        send, _receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        flood = object()
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)

            async def flooding() -> None:
                while True:
                    await outbox.put(LINE, flood)

            tg.start_soon(flooding)
            await wait_all_tasks_blocked()  # every bulk byte the outbox may hold is b's
            with anyio.move_on_after(10) as waited:
                await outbox.put(b"reply-a\n", object())
            tg.cancel_scope.cancel()
        return waited.cancelled_caught

    assert anyio.run(main) is False


class _Trickle:
    """A stream that takes a few bytes at once when asked, and the rest later."""

    def __init__(self, at_once: int) -> None:
        self.data = b""
        self._at_once = at_once

    def try_send(self, item: bytes) -> int:
        self.data += item[: self._at_once]
        return min(self._at_once, len(item))

    async def send(self, item: bytes) -> None:
        self.data += item


def test_a_line_begun_at_once_is_finished_first_and_sent_once() -> None:
    async def main() -> bytes:
        stream = _Trickle(at_once=5)
        outbox = Outbox(stream)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await outbox.put(b"first line\n", "a")
            await outbox.put(b"second\n", "b")
            await outbox.put_control(b"pong\n")
            outbox.close()
        return stream.data

    assert anyio.run(main) == b"first line\npong\nsecond\n"


def test_a_batch_reply_follows_its_members_chunks() -> None:
    async def main() -> list[bytes]:
        send, receive = anyio.create_memory_object_stream[bytes](0)
        outbox = Outbox(send)
        member = object()
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            await outbox.put(b"start\n")
            await wait_all_tasks_blocked()
            await outbox.put(b"member-chunk\n", member)

            async def batch_reply() -> None:
                await outbox.drained(member)
                await outbox.put(b"[replies]\n")

            tg.start_soon(batch_reply)
            lines = await _read_lines(receive, 3)
            tg.cancel_scope.cancel()
        return lines

    assert anyio.run(main) == [b"start\n", b"member-chunk\n", b"[replies]\n"]
