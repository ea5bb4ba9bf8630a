"""What the WebSocket listener is told, checked before the daemon starts.

Pure rules, no I/O but the token file's: the `--listen` URL, whether a host is
loopback (the only place a listener may run without a token), the token file's
content and mode, and the bearer check each upgrade request passes.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from bashrpc.protocol import messages

SCHEME = "ws"
HTTP_SCHEME = "http"
# `localhost` means IPv4 loopback: no name lookup decides where a shell is served.
LOCALHOST = "127.0.0.1"
# A bearer token shorter than this is guessable; `openssl rand -hex 32` gives 64.
MIN_TOKEN_CHARS = 16
# Others: no access to the token file; group: no write. Group read stays allowed:
# it is how Kubernetes gives a Secret to a non-root container (fsGroup, 0440).
TOKEN_FILE_OPEN_MASK = 0o027
BEARER = "bearer"


class ListenError(Exception):
    """The listener can't start as asked; the text says why."""


class ListenAddress(msgspec.Struct, frozen=True):
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{SCHEME}://{host}:{self.port if port is None else port}"


def parse_listen(url: str) -> ListenAddress:
    """`ws://HOST:PORT`, HOST an IP address (IPv6 in brackets) or `localhost`."""
    address, path = _split_listen(url, SCHEME, messages.WS_BAD_LISTEN)
    if path not in ("", "/"):
        raise ListenError(messages.WS_BAD_LISTEN.format(url=url))
    return address


def parse_http_listen(url: str) -> tuple[ListenAddress, str]:
    """`http://HOST:PORT/PATH` (PATH `/` when none): the address and the path."""
    address, path = _split_listen(url, HTTP_SCHEME, messages.WS_BAD_LISTEN_SCHEME)
    return address, path or "/"


def _split_listen(url: str, scheme: str, text: str) -> tuple[ListenAddress, str]:
    bad = ListenError(text.format(url=url))
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise bad from None
    host = parts.hostname
    if parts.scheme != scheme or host is None or port is None:
        raise bad
    if parts.query or parts.fragment or parts.username:
        raise bad
    return ListenAddress(ip_host(host, bad), port), parts.path


def ip_host(host: str, bad: ListenError) -> str:
    """An IP address as given, or `localhost` as IPv4 loopback; else `bad`."""
    host = LOCALHOST if host == "localhost" else host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise bad from None
    return host


def check_token(text: str) -> str:
    """The token in a file's text (a trailing newline dropped), if it is one."""
    token = text.rstrip("\r\n")
    printable = all("!" <= ch <= "~" for ch in token)
    if len(token) < MIN_TOKEN_CHARS or not printable:
        raise ListenError(messages.WS_TOKEN_WEAK.format(minimum=MIN_TOKEN_CHARS))
    return token


def read_token(path: Path) -> str:
    """The token, read once at the start; a file others may read, or anyone but
    its owner write, is refused."""
    try:
        with open(path, encoding="utf-8") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            if mode & TOKEN_FILE_OPEN_MASK:
                raise ListenError(messages.WS_TOKEN_EXPOSED.format(mode=f"{mode:o}"))
            return check_token(f.read())
    except (ListenError, OSError, UnicodeDecodeError) as exc:
        raise ListenError(messages.WS_TOKEN_FILE.format(path=path, reason=exc)) from None


def check_start(address: ListenAddress, token: str | None, insecure_loopback: bool) -> None:
    """Never a listener without a token, but on loopback when asked for by name."""
    if token is not None:
        return
    if not insecure_loopback:
        raise ListenError(messages.WS_NO_TOKEN)
    if not address.loopback:
        raise ListenError(messages.WS_INSECURE_NOT_LOOPBACK.format(host=address.host))


def _digest(text: str) -> bytes:
    # Equal lengths for the comparison: not even the token's length shows in its time.
    return hashlib.sha256(text.encode()).digest()


def bearer_refusal(authorization: list[str], token: str) -> str | None:
    """Why a request's Authorization headers don't let it in; None: they do."""
    if len(authorization) != 1:
        return messages.WS_NO_BEARER
    scheme, _, presented = authorization[0].strip().partition(" ")
    if scheme.lower() != BEARER:
        return messages.WS_NO_BEARER
    if not hmac.compare_digest(_digest(presented.strip()), _digest(token)):
        return messages.WS_WRONG_TOKEN
    return None
