"""The proxy's parsers (pure): HTTP heads, SOCKS5, a TLS ClientHello's server
name, each fed every cut of its input (a prefix reads as `more`, the whole
as the same answer)."""

from __future__ import annotations

import ssl

import pytest

from bashrpc.server.runtime.network import clienthello, httphead, socks


def client_hello(server_name: str | None) -> bytes:
    """A real ClientHello, as Python's TLS client sends it."""
    context = ssl.create_default_context()
    context.check_hostname = server_name is not None
    if server_name is None:
        context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_server_name_is_read_at_every_cut() -> None:
    hello = client_hello("Files.Example.org")
    for cut in range(len(hello)):
        assert clienthello.read(hello[:cut]) == clienthello.MORE, cut
    assert clienthello.read(hello) == clienthello.Hello("hello", "Files.Example.org")
    # What follows the hello changes nothing.
    assert clienthello.read(hello + b"\x17\x03\x03").server_name == "Files.Example.org"


def test_a_hello_split_over_two_records() -> None:
    hello = client_hello("a.example.org")
    body = hello[5:]
    half = len(body) // 2
    split = (
        b"\x16\x03\x01"
        + half.to_bytes(2, "big")
        + body[:half]
        + b"\x16\x03\x01"
        + (len(body) - half).to_bytes(2, "big")
        + body[half:]
    )
    for cut in range(len(split)):
        assert clienthello.read(split[:cut]).status == "more", cut
    assert clienthello.read(split).server_name == "a.example.org"


def test_a_hello_without_a_name() -> None:
    assert clienthello.read(client_hello(None)) == clienthello.Hello("hello", None)


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "other"),
        (b"SSH-2.0-OpenSSH\r\n", "other"),
        (b"\x16\x03\x01\x00\x04\x02\x00\x00\x00", "malformed"),  # a ServerHello
        (b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", "malformed"),  # too short a body
        (b"\x16\x03\x01\x00\x04\x01\x00\x00\x00\x15\x03", "malformed"),  # then an alert
        (b"\x16\x03\x01\xff\xff" + b"\x00" * (clienthello.MAX_HELLO), "malformed"),
    ],
)
def test_what_is_no_hello(data: bytes, status: str) -> None:
    assert clienthello.read(data).status == status


def cuts(data: bytes) -> list[bytes]:
    return [data[:cut] for cut in range(len(data))]


@pytest.mark.parametrize(
    ("head", "status", "host", "port"),
    [
        (
            b"CONNECT git.example.com:443 HTTP/1.1\r\nHost: git.example.com:443\r\n\r\n",
            "connect",
            "git.example.com",
            443,
        ),
        (b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", "connect", "2001:db8::1", 443),
        (
            b"GET http://index.example.org/simple/x/ HTTP/1.1\r\n"
            b"Host: index.example.org\r\nAccept: */*\r\n\r\n",
            "forward",
            "index.example.org",
            80,
        ),
        (
            b"GET HTTP://Index.Example.org:8080?q HTTP/1.0\r\n\r\n",
            "forward",
            "Index.Example.org",
            8080,
        ),
    ],
)
def test_proxy_heads_at_every_cut(head: bytes, status: str, host: str, port: int) -> None:
    for prefix in cuts(head):
        assert httphead.read(prefix) == httphead.MORE
    read = httphead.read(head + b"body")
    assert (read.status, read.host, read.port, read.used) == (status, host, port, len(head))


def test_a_forwarded_head_goes_out_in_origin_form_and_closes() -> None:
    head = (
        b"GET http://index.example.org/simple/?a=1 HTTP/1.1\r\nHost: index.example.org\r\n"
        b"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n"
        b"Connection: keep-alive\r\nUser-Agent: t\r\n\r\n"
    )
    assert httphead.read(head).upstream == (
        b"GET /simple/?a=1 HTTP/1.1\r\nHost: index.example.org\r\nUser-Agent: t\r\n"
        b"Connection: close\r\n\r\n"
    )
    bare = httphead.read(b"GET http://a.example.org HTTP/1.0\r\n\r\n").upstream
    assert bare == b"GET / HTTP/1.0\r\nHost: a.example.org\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(
    ("head", "code", "reason"),
    [
        # Host smuggling: the server would read another host than the proxy decided on.
        (b"GET http://a.example.org/ HTTP/1.1\r\nHost: evil.net\r\n\r\n", 403, "smuggled"),
        (
            b"GET http://a.example.org/ HTTP/1.1\r\nHost: a.example.org:8080\r\n\r\n",
            403,
            "smuggled",
        ),
        (
            b"GET http://a.example.org/ HTTP/1.1\r\nHost: a.example.org\r\nHost: evil.net\r\n\r\n",
            403,
            "smuggled",
        ),
        (b"CONNECT a.example.org:443 HTTP/1.1\r\nHost: evil.net:443\r\n\r\n", 403, "smuggled"),
        (b"GET http://a.example.org@evil.net/ HTTP/1.1\r\n\r\n", 400, "malformed"),
        # Not a proxy request, or not one this proxy serves.
        (b"GET / HTTP/1.1\r\nHost: a.example.org\r\n\r\n", 400, "malformed"),
        (b"GET https://a.example.org/ HTTP/1.1\r\n\r\n", 400, "malformed"),
        (b"CONNECT a.example.org HTTP/1.1\r\n\r\n", 400, "malformed"),
        (b"CONNECT a.example.org:0 HTTP/1.1\r\n\r\n", 400, "malformed"),
        (b"CONNECT a.example.org:65536 HTTP/1.1\r\n\r\n", 400, "malformed"),
        (b"CONNECT a.example.org:443 HTTP/2.0\r\n\r\n", 400, "malformed"),
        (b"CONNECT  a.example.org:443 HTTP/1.1\r\n\r\n", 400, "malformed"),
        (b"\x00\xff garbage\r\n\r\n", 400, "malformed"),
        (b"GET http://a.example.org/ HTTP/1.1\r\n folded: x\r\n\r\n", 400, "malformed"),
        (b"GET http://a.example.org/ HTTP/1.1\r\nno colon\r\n\r\n", 400, "malformed"),
        # A body framed two ways.
        (
            b"POST http://a.example.org/ HTTP/1.1\r\n"
            b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
            "malformed",
        ),
        (
            b"POST http://a.example.org/ HTTP/1.1\r\n"
            b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
            400,
            "malformed",
        ),
    ],
)
def test_refused_heads(head: bytes, code: int, reason: str) -> None:
    read = httphead.read(head)
    assert (read.status, read.code, read.reason) == ("refused", code, reason)


def test_a_head_past_the_limit_is_refused_without_its_end() -> None:
    big = b"GET http://a.example.org/ HTTP/1.1\r\nX: " + b"a" * httphead.MAX_HEAD
    assert httphead.read(big).code == 431
    assert httphead.read(big + b"\r\n\r\n").code == 431


GREETING = b"\x05\x02\x00\x02"


def test_socks_greeting_at_every_cut() -> None:
    for prefix in cuts(GREETING):
        assert socks.greeting(prefix) == socks.MORE
    step = socks.greeting(GREETING + b"\x05")
    assert (step.status, step.used) == ("done", 4)
    assert socks.greeting_reply(step) == b"\x05\x00"


@pytest.mark.parametrize(
    ("request_bytes", "host", "port"),
    [
        (b"\x05\x01\x00\x03\x0fgit.example.com\x01\xbb", "git.example.com", 443),
        (b"\x05\x01\x00\x01\xcb\x00\x71\x07\x00\x50", "203.0.113.7", 80),
        (b"\x05\x01\x00\x04" + bytes(15) + b"\x01\x00\x50", "::1", 80),
    ],
)
def test_socks_requests_at_every_cut(request_bytes: bytes, host: str, port: int) -> None:
    for prefix in cuts(request_bytes):
        assert socks.request(prefix) == socks.MORE
    step = socks.request(request_bytes + b"\x16")
    assert (step.status, step.host, step.port, step.used) == (
        "done",
        host,
        port,
        len(request_bytes),
    )


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\x05\x02\x00\x03\x01a\x00\x50", socks.COMMAND_NOT_SUPPORTED),  # BIND
        (b"\x05\x03\x00\x03\x01a\x00\x50", socks.COMMAND_NOT_SUPPORTED),  # UDP ASSOCIATE
        (b"\x05\x01\x00\x09\x01a\x00\x50", socks.ADDRESS_NOT_SUPPORTED),
        (b"\x04\x01\x00\x50\x01\x02\x03\x04\x00", socks.GENERAL_FAILURE),
    ],
)
def test_socks_refusals(data: bytes, code: int) -> None:
    step = socks.request(data)
    assert (step.status, step.code) == ("refused", code)
    assert socks.reply(step.code)[:2] == bytes((5, code))


@pytest.mark.parametrize("data", [b"\x05\x01\x02", b"\x04\x01\x00", b"\x05\x00"])
def test_socks_greetings_without_no_auth_are_refused(data: bytes) -> None:
    step = socks.greeting(data)
    assert step.status == "refused"
    assert socks.greeting_reply(step) == b"\x05\xff"
