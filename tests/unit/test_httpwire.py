"""The probes' HTTP, sans I/O: a head cut anywhere is complete only once whole."""

import pytest

from bashrpc.server.observe import httpwire
from bashrpc.server.observe.httpwire import HttpError

HEAD = b"GET /readyz?verbose=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n"


@pytest.mark.parametrize("cut", range(len(HEAD)))
def test_a_head_cut_anywhere_is_complete_only_when_whole(cut: int) -> None:
    assert not httpwire.head_complete(HEAD[:cut])
    assert httpwire.head_complete(HEAD[:cut] + HEAD[cut:])


def test_a_head_is_parsed_into_method_path_and_headers() -> None:
    request = httpwire.parse(HEAD)
    assert (request.method, request.path) == ("GET", "/readyz")
    assert request.headers == {"host": ["x"], "authorization": ["Bearer abc"]}


def test_a_repeated_header_keeps_every_value() -> None:
    head = b"GET / HTTP/1.1\r\nAuthorization: a\r\nauthorization: b\r\n\r\n"
    assert httpwire.parse(head).headers["authorization"] == ["a", "b"]


def test_bare_line_feeds_are_taken_as_curl_and_probes_never_send_them() -> None:
    assert httpwire.parse(b"HEAD /livez HTTP/1.0\nX: 1\n\n").method == "HEAD"


@pytest.mark.parametrize(
    "head",
    [
        b"GET /\r\n\r\n",
        b"GET / SPDY/3\r\n\r\n",
        b"\xff\xfe / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET / HTTP/1.1\r\n Folded: x\r\n\r\n",
    ],
)
def test_what_is_not_a_request_head_is_400(head: bytes) -> None:
    with pytest.raises(HttpError) as caught:
        httpwire.parse(head)
    assert caught.value.status == 400


def test_a_head_past_the_bound_is_431_before_it_is_whole() -> None:
    with pytest.raises(HttpError) as caught:
        httpwire.head_complete(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 2000)
    assert caught.value.status == 431


def test_a_response_says_its_length_and_closes() -> None:
    reply = httpwire.response(503, b'{"ready":false}', "application/json")
    head, body = reply.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Content-Length: 15" in head and b"Connection: close" in head
    assert body == b'{"ready":false}'
    assert httpwire.response(200, b"abc", "text/plain", head_only=True).endswith(b"\r\n\r\n")


def head_of(size: int) -> bytes:
    """A GET head of exactly `size` bytes, its blank line included."""
    start, end = b"GET /livez HTTP/1.1\r\nX-Pad: ", b"\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


def test_a_head_of_the_bound_is_whole_and_one_byte_more_is_431() -> None:
    """The bound is the head's whole size, blank line included, however the bytes
    arrived: nothing past it is ever looked at."""
    assert httpwire.head_complete(head_of(httpwire.MAX_HEAD_BYTES))
    with pytest.raises(HttpError) as caught:
        httpwire.head_complete(head_of(httpwire.MAX_HEAD_BYTES + 1))
    assert caught.value.status == 431
    assert httpwire.MAX_HEAD_BYTES == 8 * 1024  # what the fleet page says
