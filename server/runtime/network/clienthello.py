"""The server name a TLS ClientHello asks for (pure), read from the first bytes
a client sends through a CONNECT tunnel, at any cut of them.

Only enough of TLS is read to find the `server_name` extension: the records
(which may split the handshake message), the ClientHello's fixed fields and its
extensions. A client that sends something else is not TLS, and the proxy lets
it through on the decision it already made for the CONNECT's name.
"""

from __future__ import annotations

from typing import Literal

import msgspec

HANDSHAKE = 0x16
CLIENT_HELLO = 1
SERVER_NAME = 0
HOST_NAME = 0
RECORD_HEADER = 5
# A ClientHello with post-quantum key shares is about 2 KiB; one larger than
# this is refused rather than buffered.
MAX_HELLO = 64 * 1024


class Hello(msgspec.Struct, frozen=True):
    """What was read: `more` (not enough bytes yet), `hello` (with its server
    name, None when it names none), `other` (not a TLS handshake), `malformed`."""

    status: Literal["more", "hello", "other", "malformed"]
    server_name: str | None = None


MORE = Hello("more")
MALFORMED = Hello("malformed")


class _Reader:
    """Bounds-checked reads from one message; a short read raises IndexError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise IndexError(n)
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def number(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def vector(self, length_bytes: int) -> bytes:
        return self.take(self.number(length_bytes))


def _handshake(data: bytes) -> bytes | Hello:
    """The handshake bytes the records carry so far, or what stops the read."""
    out = bytearray()
    at = 0
    while at + RECORD_HEADER <= len(data):
        if data[at] != HANDSHAKE or data[at + 1] != 3:
            return MALFORMED if at else Hello("other")
        length = int.from_bytes(data[at + 3 : at + 5], "big")
        out += data[at + RECORD_HEADER : at + RECORD_HEADER + length]
        if at + RECORD_HEADER + length > len(data):
            break
        at += RECORD_HEADER + length
    if at == 0 and data and data[0] != HANDSHAKE:
        return Hello("other")
    return bytes(out)


def read(data: bytes) -> Hello:
    """The ClientHello's server name from the first bytes of a tunnel."""
    if len(data) > MAX_HELLO:
        return MALFORMED
    handshake = _handshake(data)
    if isinstance(handshake, Hello):
        return handshake
    if len(handshake) < 4:
        return MORE
    if handshake[0] != CLIENT_HELLO:
        return MALFORMED
    length = int.from_bytes(handshake[1:4], "big")
    if len(handshake) < 4 + length:
        return MORE
    try:
        return _server_name(handshake[4 : 4 + length])
    except IndexError:
        return MALFORMED


def _server_name(body: bytes) -> Hello:
    reader = _Reader(body)
    reader.take(2 + 32)  # version, random
    reader.vector(1)  # session id
    reader.vector(2)  # cipher suites
    reader.vector(1)  # compression methods
    if reader.at == len(body):
        return Hello("hello")
    extensions = _Reader(reader.vector(2))
    while extensions.at < len(extensions.data):
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind == SERVER_NAME:
            names = _Reader(_Reader(data).vector(2))
            while names.at < len(names.data):
                name_type = names.number(1)
                name = names.vector(2)
                if name_type == HOST_NAME:
                    return Hello("hello", name.decode("ascii", errors="replace"))
    return Hello("hello")
