"""Plain HTTP/1.1 for probes and scrapes, sans I/O: a request head in, a
response out. Only what a kubelet, Prometheus or curl sends is understood
(`GET`/`HEAD`, no body); everything else gets its status and the connection
is closed after every response, so no request ever waits on a slow peer."""

from __future__ import annotations

import msgspec

# A probe's head is a few hundred bytes; past this (its blank line included) the
# peer is not a probe. Nothing past it is read.
MAX_HEAD_BYTES = 8192
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class Request(msgspec.Struct, frozen=True):
    method: str
    path: str
    # Header names lowercased, each with every value sent (a repeat is not merged).
    headers: dict[str, list[str]]


def head_complete(data: bytes) -> bool:
    """Whether `data` holds a whole request head within MAX_HEAD_BYTES;
    HttpError(431) once it cannot."""
    window = data[:MAX_HEAD_BYTES]
    if b"\r\n\r\n" in window or b"\n\n" in window:
        return True
    if len(data) >= MAX_HEAD_BYTES:
        raise HttpError(431)
    return False


def parse(data: bytes) -> Request:
    head = data.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    try:
        lines = head.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise HttpError(400) from None
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400)
    method, target, _version = parts
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HttpError(400)
        headers.setdefault(name.lower(), []).append(value.strip())
    path = target.split("?", 1)[0]
    return Request(method=method, path=path, headers=headers)


def response(status: int, body: bytes, content_type: str, *, head_only: bool = False) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head_only else body)
