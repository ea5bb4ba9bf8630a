"""SOCKS5 as the proxy speaks it (pure): the greeting, the CONNECT request with a
domain name or an address, and the replies, at any cut of the client's bytes.

Only CONNECT without authentication is served (RFC 1928): a command in the
sandbox needs nothing else, and a refusal carries one of the RFC's codes.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Literal

import msgspec

VERSION = 5
NO_AUTH = 0
NO_ACCEPTABLE = 0xFF
CONNECT = 1
IPV4, DOMAIN, IPV6 = 1, 3, 4
# Reply codes.
SUCCEEDED = 0
GENERAL_FAILURE = 1
NOT_ALLOWED = 2
HOST_UNREACHABLE = 4
CONNECTION_REFUSED = 5
COMMAND_NOT_SUPPORTED = 7
ADDRESS_NOT_SUPPORTED = 8


class Step(msgspec.Struct, frozen=True):
    """One parse: `more` bytes needed, `done` (with what was read and how many
    bytes it took), or `refused` with the reply code (or greeting answer) to send."""

    status: Literal["more", "done", "refused"]
    used: int = 0
    host: str = ""
    port: int = 0
    code: int = 0


MORE = Step("more")


def greeting(data: bytes) -> Step:
    """The client's greeting: the version and the methods it offers."""
    if len(data) < 2:
        return MORE
    if data[0] != VERSION:
        return Step("refused", code=NO_ACCEPTABLE)
    end = 2 + data[1]
    if len(data) < end:
        return MORE
    if NO_AUTH not in data[2:end]:
        return Step("refused", code=NO_ACCEPTABLE)
    return Step("done", used=end)


def greeting_reply(step: Step) -> bytes:
    return bytes((VERSION, NO_AUTH if step.status == "done" else step.code))


def request(data: bytes) -> Step:
    """The client's request: CONNECT to a domain name or an IPv4 or IPv6 address."""
    if len(data) < 5:
        return MORE
    if data[0] != VERSION:
        return Step("refused", code=GENERAL_FAILURE)
    if data[1] != CONNECT:
        return Step("refused", code=COMMAND_NOT_SUPPORTED)
    kind = data[3]
    if kind == DOMAIN:
        start, end = 5, 5 + data[4]
    elif kind in (IPV4, IPV6):
        start, end = 4, 4 + (4 if kind == IPV4 else 16)
    else:
        return Step("refused", code=ADDRESS_NOT_SUPPORTED)
    if len(data) < end + 2:
        return MORE
    raw = data[start:end]
    if kind == DOMAIN:
        host = raw.decode("ascii", errors="replace")
    else:
        host = str(ipaddress.ip_address(raw))
    (port,) = struct.unpack("!H", data[end : end + 2])
    return Step("done", used=end + 2, host=host, port=port)


def reply(code: int) -> bytes:
    """The reply to a request: the code, and an unspecified bound address."""
    return bytes((VERSION, code, 0, IPV4, 0, 0, 0, 0, 0, 0))
