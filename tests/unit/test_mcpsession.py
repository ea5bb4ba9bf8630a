"""A Streamable HTTP session's routing, sans I/O: which stream each line the
connection writes goes to, when a stream ends, and what a resuming client gets."""

from __future__ import annotations

import anyio
import msgspec

from bashrpc.server.daemon.mcpsession import (
    STREAM_KEEP_BYTES,
    Message,
    Session,
    Stream,
    parse_event_id,
)


def message(text: str) -> Message:
    return msgspec.json.decode(text.encode(), type=Message)


def lines(stream: Stream) -> list[bytes]:
    return [data for _seq, data in stream.snapshot()]


CALL = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}'
PROGRESS = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p"}}'
ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{}}'
OTHER = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


def test_an_answer_and_its_progress_go_to_the_stream_of_their_request() -> None:
    session = Session(registered=True)
    stream = session.open_stream([message(CALL)], sse=True)
    session.route(PROGRESS)
    assert not stream.closed
    session.route(ANSWER)
    assert lines(stream) == [PROGRESS, ANSWER] and stream.closed


def test_other_notifications_go_to_the_get_stream_else_an_open_post_stream() -> None:
    session = Session(registered=True)
    post = session.open_stream([message(CALL)], sse=True)
    session.route(OTHER)
    assert lines(post) == [OTHER]
    standalone = session.open_standalone()
    session.route(OTHER)
    assert lines(standalone) == [OTHER] and lines(post) == [OTHER]


def test_a_line_with_nowhere_to_go_is_counted_not_kept() -> None:
    session = Session(registered=True)
    session.route(OTHER)
    session.route(b"not json")
    assert session.dropped == 2


def test_a_json_reply_gets_only_its_answers() -> None:
    session = Session(registered=True)
    stream = session.open_stream([message(CALL)], sse=False)
    session.route(PROGRESS)
    session.route(ANSWER)
    assert lines(stream) == [ANSWER] and session.dropped == 1


def test_a_cancelled_request_no_longer_holds_its_stream_open() -> None:
    session = Session(registered=True)
    stream = session.open_stream([message(CALL)], sse=True)
    cancel = '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}'
    session.withdrawn([message(cancel)])
    assert stream.closed


def test_a_stateless_exchange_ends_its_input_once_answered() -> None:
    session = Session(registered=False)
    assert session.id is None
    session.open_stream([message(CALL)], sse=True)
    session.route(ANSWER)

    async def main() -> None:
        transport = session.transport()
        with anyio.fail_after(5):
            try:
                await transport.receive.receive()
            except anyio.EndOfStream:
                return
        raise AssertionError("input went on")

    anyio.run(main)


def test_a_resuming_reader_gets_what_came_after_its_last_event() -> None:
    stream = Stream(3, {b"1"}, sse=True)
    for n in range(4):
        stream.put(b"%d" % n)
    stream.close()
    assert parse_event_id(stream.event_id(2)) == (3, 2)
    assert anyio.run(stream.wait_after, 2) == [(3, b"2"), (4, b"3")]
    assert anyio.run(stream.wait_after, 4) == []
    assert parse_event_id("x-1") is None and parse_event_id("12") is None


def test_a_stream_keeps_a_bounded_tail() -> None:
    stream = Stream(1, set(), sse=True)
    chunk = b"x" * (STREAM_KEEP_BYTES // 4)
    for _ in range(10):
        stream.put(chunk)
    kept = stream.snapshot()
    assert sum(len(data) for _seq, data in kept) <= STREAM_KEEP_BYTES
    assert kept[-1][0] == 10


def test_streams_written_out_whole_are_not_kept() -> None:
    session = Session(registered=True)
    first = session.open_stream([message(CALL)], sse=True)
    session.route(ANSWER)
    first.delivered = True
    lost = session.open_stream([message(CALL.replace('"id":7', '"id":8'))], sse=True)
    session.route(ANSWER.replace(b'"id":7', b'"id":8'))
    session.open_stream([], sse=True)
    assert first.number not in session.streams and lost.number in session.streams


def test_the_revision_is_what_the_answer_to_initialize_settled() -> None:
    session = Session(registered=True)
    initialize = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    session.open_stream([message(initialize)], sse=False)
    assert session.revision is None
    session.route(b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}')
    assert session.revision == "2025-06-18"
    # Another request's answer with the same field settles nothing.
    session.open_stream([message(CALL)], sse=False)
    session.route(b'{"jsonrpc":"2.0","id":7,"result":{"protocolVersion":"2024-11-05"}}')
    assert session.revision == "2025-06-18"


def test_an_abandoned_stateless_stream_cancels_its_requests_into_the_connection() -> None:
    session = Session(registered=False, owner="principal:own-uid")
    stream = session.open_stream([message(CALL)], sse=True)
    assert session.transport().owner == "principal:own-uid"

    async def main() -> bytes:
        await session.abandon(stream)
        return await session.transport().receive.receive()

    line = anyio.run(main)
    assert stream.closed
    cancelled = msgspec.json.decode(line)
    assert cancelled == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 7},
    }
