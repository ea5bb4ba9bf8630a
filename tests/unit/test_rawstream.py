"""RawStream: a PTY's bytes as numbered `pty/output`s, in order, none empty."""

from __future__ import annotations

import base64

import anyio

from bashrpc.server.output.chunks import RawStream

INTERVAL = 0.001


def sent(pushes: list[bytes]) -> list[tuple[int, bytes]]:
    """What a stream emits for these pushes, each after the previous one went out."""

    async def main() -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []

        async def emit(seq: int, data: str) -> None:
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
