"""The outbox's two lanes, on an in-memory stream whose reader the test controls."""

from __future__ import annotations

import anyio
import anyio.abc
from anyio import wait_all_tasks_blocked

from server.wire.outbox import CONTROL_MAX_BYTES, OUTBOX_MAX_BYTES, Outbox

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
