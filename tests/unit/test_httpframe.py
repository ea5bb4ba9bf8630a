"""The Streamable HTTP listener's HTTP, sans I/O: requests cut from bytes however
they are split, the bounds, and the bytes of responses and SSE events."""

from __future__ import annotations

import pytest

from bashrpc.server.daemon.httpframe import (
    HttpRequest,
    RequestReader,
    response,
    response_head,
    sse_event,
)
from bashrpc.server.observe.httpwire import HttpError

BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
POST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
)
GET = b"GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"


def read_all(chunks: list[bytes], max_body: int = 1 << 20) -> list[HttpRequest]:
    reader = RequestReader(max_body)
    found = []
    for chunk in chunks:
        reader.feed(chunk)
        while (request := reader.next_request()) is not None:
            found.append(request)
    return found


def test_two_requests_on_one_connection_split_at_every_byte() -> None:
    data = POST + GET
    whole = read_all([data])
    assert [(r.method, r.body) for r in whole] == [("POST", BODY), ("GET", b"")]
    for cut in range(1, len(data)):
        assert read_all([data[:cut], data[cut:]]) == whole, cut


def test_a_request_reads_its_headers() -> None:
    [request] = read_all([POST])
    assert request.path == "/mcp" and request.header("host") == "127.0.0.1:9"
    assert request.accepts("text/event-stream") and request.accepts("application/json")
    assert request.keep_alive
    [get] = read_all([GET])
    assert not get.accepts("application/json") and get.header("origin") is None


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (POST.replace(b"Content-Length: 40", b"Content-Length: 41"), None),
        (POST.replace(b"Content-Length: 40", b"Content-Length: 9999999"), 413),
        (POST.replace(b"Content-Length: 40", b"Transfer-Encoding: chunked"), 411),
        (POST.replace(b"Content-Length: 40", b"Content-Length: -4"), 400),
        (
            POST.replace(
                b"Content-Length: 40\r\n", b"Content-Length: 40\r\nContent-Length: 41\r\n"
            ),
            400,
        ),
        (b"POST /mcp HTTP/1.1\r\nX: " + b"a" * 9000, 431),
    ],
)
def test_what_cannot_be_a_request_is_refused_by_status(data: bytes, status: int | None) -> None:
    reader = RequestReader(1024)
    reader.feed(data)
    if status is None:
        assert reader.next_request() is None  # a body still on its way
        return
    with pytest.raises(HttpError) as refused:
        reader.next_request()
    assert refused.value.status == status


def test_responses_say_their_length_or_run_to_the_close() -> None:
    whole = response(202, b"", [("Mcp-Session-Id", "s")], keep_alive=True)
    assert whole.startswith(b"HTTP/1.1 202 Accepted\r\nMcp-Session-Id: s\r\n")
    assert b"Content-Length: 0\r\nConnection: keep-alive\r\n\r\n" in whole
    streamed = response_head(200, [("Content-Type", "text/event-stream")], None, keep_alive=True)
    assert b"Content-Length" not in streamed and streamed.endswith(b"Connection: close\r\n\r\n")


def test_an_sse_event_is_one_data_line() -> None:
    assert sse_event("3-1", b'{"a":\n1}') == b'id: 3-1\ndata: {"a": 1}\n\n'
    assert sse_event(None, b"{}", retry_ms=500) == b"retry: 500\ndata: {}\n\n"


def test_the_head_is_read_before_its_body_has_come() -> None:
    reader = RequestReader(1 << 20)
    head_end = POST.index(b"\r\n\r\n") + 4
    reader.feed(POST[: head_end - 1])
    assert reader.next_head() is None
    reader.feed(POST[head_end - 1 : head_end + 3])
    head = reader.next_head()
    assert head is not None and head.method == "POST" and head.body == b""
    assert reader.next_request() is None  # the body is still on its way
    reader.feed(POST[head_end + 3 :])
    request = reader.next_request()
    assert request is not None and request.body == BODY
