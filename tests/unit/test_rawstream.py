"""RawStream: a PTY's bytes as numbered `pty/output`s, in order, none empty;
what a client too far behind loses is counted on the next one."""

from __future__ import annotations

import base64

import anyio

from bashrpc.server.output.chunks import RawStream

INTERVAL = 0.001


def sent(pushes: list[bytes]) -> list[tuple[int, bytes]]:
    """What a stream emits for these pushes, each after the previous one went out."""

    async def main() -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []

        async def emit(seq: int, data: str, skipped: int) -> None:
            assert skipped == 0
            got.append((seq, base64.b64decode(data)))

        async with anyio.create_task_group() as tg:
            stream = RawStream(emit, tg, interval=INTERVAL)
            for data in pushes:
                count = len(got)
                stream.push(data)
                if not data:
                    # Time for a flush, were there one to make.
                    await anyio.sleep(INTERVAL * 20)
                with anyio.fail_after(10):
                    while data and len(got) == count:
                        await anyio.sleep(INTERVAL)
            await stream.close()
        return got

    return anyio.run(main)


def test_each_flush_is_numbered_from_zero_in_order() -> None:
    pieces = [b"one\r\n", b"\x1b[1mtwo\x1b[0m\r\n", b"three"]
    assert sent(pieces) == list(enumerate(pieces))


def test_an_empty_push_sends_nothing_and_takes_no_number() -> None:
    assert sent([b"a", b"", b"b", b""]) == [(0, b"a"), (1, b"b")]


def test_bytes_dropped_for_a_client_far_behind_are_counted_on_the_next_output() -> None:
    """The client takes nothing while 3 MiB arrive: the oldest are dropped, and
    the next `pty/output` says how many came before its data, so the numbers
    still add up to what the terminal wrote."""
    cap = 1024 * 1024
    pushes = [bytes([65 + i % 26]) * 64 * 1024 for i in range(48)]

    async def main() -> list[tuple[int, bytes, int]]:
        got: list[tuple[int, bytes, int]] = []
        taking = anyio.Event()

        async def emit(seq: int, data: str, skipped: int) -> None:
            await taking.wait()
            got.append((seq, base64.b64decode(data), skipped))

        async with anyio.create_task_group() as tg:
            stream = RawStream(emit, tg, interval=INTERVAL, max_pending=cap)
            stream.push(pushes[0])
            # The first output is on its way, and stuck: the client takes nothing.
            await anyio.sleep(INTERVAL * 20)
            for data in pushes[1:]:
                stream.push(data)
            taking.set()
            await stream.close()
        return got

    got = anyio.run(main)
    assert [seq for seq, _, _ in got] == list(range(len(got)))
    written = b"".join(pushes)
    assert sum(len(data) + skipped for _, data, skipped in got) == len(written)
    [(_, first, none), (_, newest, skipped)] = got
    assert (first, none) == (pushes[0], 0)
    assert skipped == len(written) - len(first) - cap and newest == written[-cap:]
