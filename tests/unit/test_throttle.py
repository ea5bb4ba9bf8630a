"""Throttle and ChunkStream, driven in-process on anyio's clock."""

from __future__ import annotations

import itertools

import anyio

from bashrpc.protocol import messages
from bashrpc.server.output.chunks import ChunkStream
from bashrpc.server.output.throttle import Throttle


def test_first_poke_flushes_at_once_then_coalesces() -> None:
    async def main() -> tuple[list[float], float]:
        times: list[float] = []
        start = anyio.current_time()

        async def flush() -> None:
            times.append(anyio.current_time() - start)

        async with anyio.create_task_group() as tg:
            throttle = Throttle(flush, 0.1, tg)
            for _ in range(30):
                throttle.poke()
                await anyio.sleep(0.01)
            poked_for = anyio.current_time() - start
            await throttle.close()
        return times, poked_for

    times, poked_for = anyio.run(main)
    assert times[0] < 0.05 + (poked_for - 0.3)  # at once, however slow the machine is
    # 30 pokes over at least 0.3 s at a 0.1 s interval: one flush per interval they
    # spanned, plus the first and the closing one; never one per poke.
    assert 3 <= len(times) <= poked_for / 0.1 + 2
    # Every flush but the closing one waits out the interval.
    assert all(b - a >= 0.09 for a, b in itertools.pairwise(times[:-1]))


def test_close_without_pokes_flushes_nothing_and_starts_no_task() -> None:
    async def main() -> int:
        calls = 0

        async def flush() -> None:
            nonlocal calls
            calls += 1

        async with anyio.create_task_group() as tg:
            throttle = Throttle(flush, 0.1, tg)
            await throttle.close()
            throttle.poke()  # after close: ignored, no task started
        return calls

    assert anyio.run(main) == 0


def test_an_urgent_poke_cuts_the_interval_short() -> None:
    async def main() -> list[float]:
        times: list[float] = []
        start = anyio.current_time()

        async def flush() -> None:
            times.append(anyio.current_time() - start)

        async with anyio.create_task_group() as tg:
            throttle = Throttle(flush, 10.0, tg)
            throttle.poke()
            await anyio.sleep(0.01)
            throttle.poke(urgent=True)
            await anyio.sleep(0.01)
            await throttle.close()
        return times

    times = anyio.run(main)
    assert len(times) == 2 and times[1] < 1.0


def test_chunk_stream_never_splits_a_character_when_skipping() -> None:
    async def main() -> list[str]:
        sent: list[str] = []
        release = anyio.Event()

        async def emit(seq: int, text: str, skipped: int) -> None:
            sent.append(text)
            await release.wait()

        async with anyio.create_task_group() as tg:
            stream = ChunkStream(emit, tg, interval=0.0, max_pending=10, stall_seconds=0.01)
            stream.push(b"x")
            await anyio.sleep(0.01)
            for _ in range(20):
                stream.push("€".encode())  # three bytes each
                await stream.wait_for_room()
            release.set()
            await stream.close()
        return sent

    rest = "".join(anyio.run(main)[1:])
    assert rest.endswith("€€") and "\ufffd" not in rest


def test_chunk_stream_keeps_order_and_text() -> None:
    async def main() -> list[tuple[int, str, int]]:
        sent: list[tuple[int, str, int]] = []

        async def emit(seq: int, text: str, skipped: int) -> None:
            sent.append((seq, text, skipped))

        async with anyio.create_task_group() as tg:
            stream = ChunkStream(emit, tg, interval=0.01)
            for i in range(100):
                stream.push(f"{i}\n".encode())
                if i % 10 == 0:
                    await anyio.sleep(0.005)
            await stream.close()
        return sent

    sent = anyio.run(main)
    assert [seq for seq, _, _ in sent] == list(range(len(sent)))
    assert "".join(text for _, text, _ in sent) == "".join(f"{i}\n" for i in range(100))
    assert len(sent) < 100 and not any(skipped for _, _, skipped in sent)


def test_a_client_that_reads_slowly_loses_nothing() -> None:
    async def main() -> list[str]:
        sent: list[str] = []

        async def emit(seq: int, text: str, skipped: int) -> None:
            assert skipped == 0
            sent.append(text)
            await anyio.sleep(0.002)  # slow, but reading

        async with anyio.create_task_group() as tg:
            stream = ChunkStream(emit, tg, interval=0.0, max_pending=100, stall_seconds=1.0)
            for i in range(300):
                stream.push(f"{i:05d}\n".encode())
                if stream.backlogged:
                    await stream.wait_for_room()
            await stream.close()
        return sent

    assert "".join(anyio.run(main)) == "".join(f"{i:05d}\n" for i in range(300))


def test_a_stalled_client_loses_the_oldest_text_and_the_producer_goes_on() -> None:
    async def main() -> tuple[list[tuple[str, int]], float]:
        sent: list[tuple[str, int]] = []
        release = anyio.Event()

        async def emit(seq: int, text: str, skipped: int) -> None:
            sent.append((text, skipped))
            await release.wait()  # the client stops reading after the first chunk

        async with anyio.create_task_group() as tg:
            stream = ChunkStream(emit, tg, interval=0.0, max_pending=100, stall_seconds=0.05)
            stream.push(b"first")
            await anyio.sleep(0.01)
            started = anyio.current_time()
            for i in range(200):
                stream.push(f"{i:03d}".encode())
                await stream.wait_for_room()
            waited = anyio.current_time() - started
            release.set()
            await stream.close()
        return sent, waited

    sent, waited = anyio.run(main)
    assert sent[0] == ("first", 0)
    # One stall was waited out; after it the producer did not wait again.
    assert 0.04 <= waited < 0.5
    rest = "".join(text for text, _ in sent[1:])
    skipped = sum(count for _, count in sent[1:])
    notice_tail = messages.NOTICE_CHUNKS_SKIPPED.split("{count}")[1]
    assert notice_tail in rest and rest.endswith("199")
    assert skipped + len(rest) - rest.index(notice_tail) - len(notice_tail) == 600
