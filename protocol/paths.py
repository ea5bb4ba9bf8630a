"""Filesystem paths on the wire.

Paths are bytes on Linux and need not be UTF-8, while JSON strings must be
Unicode. So a path travels as its text, decoded from UTF-8 with U+FFFD for
any invalid byte, and, only when that lost something, also as the exact
bytes in base64 (the `...Base64` field beside it). Server code holds paths
as Python strings with undecodable bytes kept as surrogates (`os.fsdecode`).
A command's output travels the same way (`bash/chunk`'s `textBase64`,
`artifact/read`'s), its text held alike by the server.
"""

from __future__ import annotations

import base64


def to_wire(path: str) -> tuple[str, str | None]:
    """(text, base64 of the exact bytes or None when the text is exact), for a
    path or any text whose bytes that are not UTF-8 are held as lone surrogates
    (surrogateescape, as a command's output is). Plain text costs no pass over it."""
    if path.isascii():
        return path, None
    return bytes_to_wire(path.encode("utf-8", "surrogateescape"))


def bytes_to_wire(raw: bytes) -> tuple[str, str | None]:
    """(text, base64 of `raw` or None when the text is exact)."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")


def from_wire(text: str, exact: str | None = None) -> bytes:
    """The path's bytes, as a client recovers them."""
    return base64.b64decode(exact) if exact is not None else text.encode("utf-8")


def printable(path: str) -> str:
    """A path fit for a message: never fails to encode."""
    return to_wire(path)[0]
