"""A real `websockets` client of a daemon's WebSocket listener, and the
daemon's listening address as its log tells it."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.daemon import DaemonProcess
from tests.rpc import RpcClient, wait_until

_LISTENING = re.compile(r"daemon listening on ((?:ws|http)://\S+)")
STOP_SECONDS = 10.0


def listening_url(daemon: DaemonProcess, scheme: str = "ws") -> str:
    """The URL the daemon's `scheme` listener logged once bound (its real port)."""
    found: list[str] = []

    def logged() -> bool:
        found[:] = [url for url in _LISTENING.findall(daemon.stderr()) if url.startswith(scheme)]
        return bool(found)

    assert wait_until(logged, timeout=30), daemon.stderr()
    return found[0]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def write_token(tmp: Path, token: str, mode: int = 0o600) -> Path:
    path = tmp / f"token-{mode:o}"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


class WebSocketClient(RpcClient):
    """One WebSocket connection: a message per text frame, read on a thread
    that can stop reading (the library then stops reading the socket once its
    queue is full, as a stalled client would)."""

    def __init__(self, url: str, token: str | None = None, **options: Any) -> None:
        super().__init__()
        headers = {} if token is None else bearer(token)
        # The server's replies may exceed the library's 1 MiB default.
        options.setdefault("max_size", None)
        self._opened = contextlib.ExitStack()
        self.ws: ClientConnection = self._opened.enter_context(
            connect(url, additional_headers=headers, **options)
        )
        self._start_reading()

    def _read(self) -> None:
        try:
            while self._reading.wait() and (message := self.ws.recv()):
                self._received(message.encode() if isinstance(message, str) else message)
        except ConnectionClosed:
            pass
        self._ended()

    def send_raw(self, data: bytes) -> None:
        for line in data.splitlines():
            self.ws.send(line.decode())

    def close(self) -> None:
        self._reading.set()
        self._opened.close()
        self._reader.join(STOP_SECONDS)
