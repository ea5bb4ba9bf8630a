"""HTTP/1.1 for the MCP listener, sans I/O: requests cut from the bytes a
connection sends, and the bytes of a response head and of SSE events.

A request is its head (`httpwire`'s parser, bounded) and a body of exactly
`Content-Length` bytes, bounded by the largest message the server takes.
Chunked bodies are refused (411): every MCP client sends a length. Requests
may follow each other on one connection (keep-alive); the reader keeps what
it was given past one request for the next.
"""

from __future__ import annotations

import msgspec

from bashrpc.server.observe import httpwire
from bashrpc.server.observe.httpwire import HttpError

REASONS = {
    **httpwire.REASONS,
    202: "Accepted",
    403: "Forbidden",
    406: "Not Acceptable",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
}
SSE = "text/event-stream"
JSON = "application/json"


class HttpRequest(msgspec.Struct, frozen=True):
    method: str
    path: str
    headers: dict[str, list[str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The one value of a header (lowercase name); None when absent or repeated."""
        values = self.headers.get(name, [])
        return values[0] if len(values) == 1 else None

    def accepts(self, media: str) -> bool:
        accept = ",".join(self.headers.get("accept", []))
        kinds = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
        return media in kinds or "*/*" in kinds

    @property
    def keep_alive(self) -> bool:
        return "close" not in ",".join(self.headers.get("connection", [])).lower()


class RequestReader:
    """Bytes in, whole requests out, one at a time."""

    def __init__(self, max_body: int) -> None:
        self._max_body = max_body
        self._data = b""

    def feed(self, data: bytes) -> None:
        self._data += data

    def next_head(self) -> HttpRequest | None:
        """The next request's head (its body empty) once whole, the body perhaps
        still to come: what the gate reads before a byte of body is kept."""
        if not httpwire.head_complete(self._data):
            return None
        head = httpwire.parse(self._data)
        return HttpRequest(head.method, head.path, head.headers, b"")

    def next_request(self) -> HttpRequest | None:
        """The next whole request, or None until more bytes come; HttpError when
        the bytes can't be one (the connection is answered and closed)."""
        if not httpwire.head_complete(self._data):
            return None
        head = httpwire.parse(self._data)
        end = _head_end(self._data)
        if head.headers.get("transfer-encoding"):
            raise HttpError(411)
        length = _content_length(head.headers.get("content-length", []))
        if length > self._max_body:
            raise HttpError(413)
        if len(self._data) < end + length:
            return None
        body = self._data[end : end + length]
        self._data = self._data[end + length :]
        return HttpRequest(head.method, head.path, head.headers, body)


def _head_end(data: bytes) -> int:
    """Where the body starts: after the first blank line (CRLF or bare LF)."""
    ends = [data.find(mark) + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if mark in data]
    return min(ends)


def _content_length(values: list[str]) -> int:
    if not values:
        return 0
    if len(set(values)) != 1 or not values[0].isdigit():
        raise HttpError(400)
    return int(values[0])


def response_head(
    status: int, headers: list[tuple[str, str]], length: int | None, keep_alive: bool
) -> bytes:
    """A status line and headers; `length` None: the body runs to the close."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append("Cache-Control: no-store")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.append(
        "Connection: keep-alive" if keep_alive and length is not None else "Connection: close"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def response(status: int, body: bytes, headers: list[tuple[str, str]], keep_alive: bool) -> bytes:
    return response_head(status, headers, len(body), keep_alive) + body


def sse_event(event_id: str | None, data: bytes, retry_ms: int | None = None) -> bytes:
    """One SSE event: a JSON message never holds a raw newline, so one data line."""
    out = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    if retry_ms is not None:
        out += f"retry: {retry_ms}\n".encode()
    return out + b"data: " + data.replace(b"\n", b" ") + b"\n\n"
