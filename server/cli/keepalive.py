"""Pings from a blocking client, so a server run with `--client-timeout` never
takes a live client for gone while it waits (for a long command, say)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec

from bashrpc.protocol.mcp import EmptyParams

# Safe with any `--client-timeout` of three times this or more.
PING_INTERVAL_SECONDS = 10.0


def interval_for(client_timeout: float | None) -> float:
    """How often to ping a server whose `--client-timeout` is known (None: unknown)."""
    if client_timeout is None:
        return PING_INTERVAL_SECONDS
    return min(PING_INTERVAL_SECONDS, client_timeout / 3)


class Keepalive:
    """A thread that sends `ping` every `interval` seconds until `stop`."""

    def __init__(
        self,
        send: Callable[[str, msgspec.Struct], object],
        interval: float = PING_INTERVAL_SECONDS,
    ) -> None:
        self._send = send
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bashrpc-keepalive", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._send("ping", EmptyParams())
            except (OSError, ValueError):
                return  # the server is gone, or its pipe closed: nothing to keep alive

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
