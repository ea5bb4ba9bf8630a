"""What the client scripts for the 1.x SDK share (imported by name from beside
them, as they run by another Python that has only the SDK): a session to a
bashrpc of its own or to a Streamable HTTP URL, the SDK's log, and a call given
up on."""

# Written for the 1.x SDK's API, which differs from the 2.x one mypy sees here.
# mypy: ignore-errors

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:
    from mcp.client.streamable_http import streamable_http_client
except ImportError:  # its name before 1.2x
    from mcp.client.streamable_http import streamablehttp_client as streamable_http_client
from mcp.types import CancelledNotification, CancelledNotificationParams, ClientNotification

LONG_COMMAND = "echo started; sleep 60"
HANG_SECONDS = 30


class Collect(logging.Handler):
    """What the SDK logs at WARNING or above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@asynccontextmanager
async def session_to(
    server_python: str, artifacts: str, report: dict[str, Any] | None = None
) -> AsyncIterator[ClientSession]:
    """A session (not yet initialized) to a bashrpc of its own; the errors the
    SDK reports go to `report["errors"]`."""
    params = StdioServerParameters(
        command=server_python,
        args=["-m", "bashrpc", "--artifacts-dir", artifacts],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")},
    )

    async def on_message(message: object) -> None:
        if report is not None and isinstance(message, Exception):
            report["errors"].append(str(message))

    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as streams,
            ClientSession(*streams, message_handler=on_message) as session,
        ):
            with anyio.fail_after(HANG_SECONDS):
                yield session


@asynccontextmanager
async def http_session_to(url: str, report: dict[str, Any]) -> AsyncIterator[ClientSession]:
    """A session (not yet initialized) over Streamable HTTP to `url`; the errors
    the SDK reports go to `report["errors"]`."""

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            report["errors"].append(str(message))

    async with (
        streamable_http_client(url) as (read, write, _session_id),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        with anyio.fail_after(HANG_SECONDS):
            yield session


async def give_up(session: ClientSession, cancel: bool) -> None:
    """Start a long call, and once it runs (its first progress) stop waiting for
    it: with `notifications/cancelled` when `cancel` (the 1.x SDK leaves sending
    it to its caller), else silently, as the 1.x SDK does."""
    started = anyio.Event()

    # Named as the SDK's progress callback protocol names them.
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: session.call_tool("bash", {"command": LONG_COMMAND}, progress_callback=progress)
        )
        await started.wait()
        if cancel:
            # The id the SDK gave the call: its last one.
            said = CancelledNotificationParams(requestId=session._request_id - 1, reason="test")
            await session.send_notification(ClientNotification(CancelledNotification(params=said)))
        tg.cancel_scope.cancel()
