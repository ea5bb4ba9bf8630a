"""An HTTP proxy request's head (pure): `CONNECT host:port` or a request with an
absolute URI (`GET http://host/...`), read at any cut of the client's bytes.

The head is bounded, each line is checked, and what could make the proxy and
the server read different requests is refused: a `Host` that names another
host than the target (smuggling), two `Host` headers, userinfo in the URI, a
body framed two ways. A forwarded request goes out in origin form with
`Connection: close`, so a second request on the same connection never reaches
the server under the first one's name.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from bashrpc.server.runtime.network import rules

MAX_HEAD = 16 * 1024
MAX_HEADERS = 100
HTTP_PORT = 80
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")
# Hop-by-hop headers the proxy answers itself; never forwarded.
_HOP = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}


class Head(msgspec.Struct, frozen=True):
    """One read: `more` bytes needed; `connect` or `forward` (with the target,
    the head's length, and for `forward` the head to send the server); or
    `refused` with the status to answer and why (`smuggled` or `malformed`)."""

    status: Literal["more", "connect", "forward", "refused"]
    host: str = ""
    port: int = 0
    used: int = 0
    upstream: bytes = b""
    code: int = 0
    reason: Literal["", "smuggled", "malformed", "too-large"] = ""
    # What the Host header said, when it disagreed with the target.
    other: str = ""


MORE = Head("more")


def _refused(
    code: int,
    reason: Literal["smuggled", "malformed", "too-large"],
    other: str = "",
    where: tuple[str, int] = ("", 0),
) -> Head:
    return Head("refused", host=where[0], port=where[1], code=code, reason=reason, other=other)


BAD = _refused(400, "malformed")


def authority(text: str, default_port: int | None) -> tuple[str, int] | None:
    """`host[:port]` (IPv6 in brackets) as (host, port); None when malformed."""
    if text.startswith("["):
        close = text.find("]")
        host, rest = text[1:close], text[close + 1 :]
        if close < 0 or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    else:
        host, _, port_text = text.partition(":") if ":" in text else (text, "", None)
    if port_text is None:
        return None if default_port is None or not host else (host, default_port)
    if not _PORT.match(port_text) or not host or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)


def _same(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return (rules.normalize(a[0]), a[1]) == (rules.normalize(b[0]), b[1])


def read(data: bytes) -> Head:
    """The proxy request at the start of `data`."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return _refused(431, "too-large") if len(data) > MAX_HEAD else MORE
    if end + 4 > MAX_HEAD:
        return _refused(431, "too-large")
    lines = data[:end].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1") or len(lines) > MAX_HEADERS:
        return BAD
    method, target = parts[0], parts[1].decode("ascii", errors="replace")
    headers = _headers(lines[1:])
    if headers is None or not _TOKEN.match(method):
        return BAD
    hosts = [v for k, v in headers if k.lower() == b"host"]
    if len(hosts) > 1:
        return _refused(403, "smuggled", b", ".join(hosts).decode(errors="replace"))
    if method == b"CONNECT":
        where = authority(target, None)
        kind: Literal["connect", "forward"] = "connect"
        path = ""
    else:
        if target[:7].lower() != "http://":
            return BAD
        cut = min((i for i in map(target.find, "/?#", (7, 7, 7)) if i >= 0), default=len(target))
        host_part, path = target[7:cut], target[cut:]
        where = None if "@" in host_part else authority(host_part, HTTP_PORT)
        kind = "forward"
    if where is None:
        return BAD
    if hosts:
        said = authority(hosts[0].decode("ascii", errors="replace"), HTTP_PORT)
        if said is None or not (_same(said, where) or (kind == "connect" and said[0] == where[0])):
            return _refused(403, "smuggled", hosts[0].decode(errors="replace"), where)
    if not _body_framed_once(headers):
        return BAD
    upstream = b""
    if kind == "forward":
        upstream = _upstream(method, path or "/", parts[2], headers, hosts, target[7:cut])
    return Head(kind, host=where[0], port=where[1], used=end + 4, upstream=upstream)


def _headers(lines: list[bytes]) -> list[tuple[bytes, bytes]] | None:
    out = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.match(name) or b"\r" in value or b"\n" in value:
            return None
        out.append((name, value.strip(b" \t")))
    return out


def _body_framed_once(headers: list[tuple[bytes, bytes]]) -> bool:
    lengths = {v for k, v in headers if k.lower() == b"content-length"}
    chunked = any(k.lower() == b"transfer-encoding" for k, _ in headers)
    return len(lengths) <= 1 and not (lengths and chunked)


def _upstream(
    method: bytes,
    path: str,
    version: bytes,
    headers: list[tuple[bytes, bytes]],
    hosts: list[bytes],
    host: str,
) -> bytes:
    lines = [b" ".join((method, path.encode("ascii", errors="replace"), version))]
    if not hosts:
        lines.append(b"Host: " + host.encode("ascii", errors="replace"))
    lines += [k + b": " + v for k, v in headers if k.lower() not in _HOP]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"
