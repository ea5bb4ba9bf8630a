"""What a running tool call tells its host: `tool/update` snapshots and MCP
progress, on a throttle, and on a PTY the terminal's raw bytes.
"""

from __future__ import annotations

from typing import Any

from bashrpc.protocol.mcp import HostOptions, ProgressParams, TextContent, ToolUpdate
from bashrpc.server.output.chunks import RawStream
from bashrpc.server.output.throttle import Owner, Throttle
from bashrpc.server.services.streams import (
    Listener,
    ListenerFactory,
    Notify,
    input_emitter,
    raw_emitter,
)
from bashrpc.server.settings import Settings

TOOL_UPDATE_INTERVAL_SECONDS = 0.1
PROGRESS_MESSAGE_MAX_CHARS = 200


class ToolUpdates:
    """`tool/update` snapshots and MCP progress for one running tool call.

    It keeps its own bounded tail of the output, so a snapshot costs no more
    than the newest `max_bytes`."""

    def __init__(
        self,
        notify: Notify,
        request_id: Any,
        *,
        snapshots: bool,
        progress_token: str | int | None,
        max_bytes: int,
        owner: Owner,
    ) -> None:
        self._notify = notify
        self._request_id = request_id
        self._snapshots = snapshots
        self._token = progress_token
        self._max = max_bytes
        self._tail = bytearray()
        self._total = 0
        self._throttle = Throttle(self._flush, TOOL_UPDATE_INTERVAL_SECONDS, owner)

    def push(self, data: bytes) -> None:
        self._total += len(data)
        self._tail += data
        if len(self._tail) > 2 * self._max:
            del self._tail[: len(self._tail) - self._max]
        self._throttle.poke()

    async def close(self) -> None:
        await self._throttle.close()

    async def _flush(self) -> None:
        tail = self._tail[-self._max :].decode("utf-8", "ignore")
        if self._snapshots:
            update = ToolUpdate(request_id=self._request_id, content=[TextContent(text=tail)])
            await self._notify("tool/update", update)
        if self._token is not None:
            last = next((line for line in reversed(tail.split("\n")) if line), "")
            progress = ProgressParams(
                progress_token=self._token,
                progress=self._total,
                message=last[:PROGRESS_MESSAGE_MAX_CHARS],
            )
            await self._notify("notifications/progress", progress)


def listener(
    notify: Notify,
    request_id: Any,
    *,
    host: HostOptions,
    progress_token: str | int | None,
    settings: Settings,
    terminal: bool,
) -> ListenerFactory:
    """The listener of a tool call: updates while it runs; raw bytes on a PTY."""
    opted_out = set(host.opt_out_notifications)
    snapshots = "tool/update" in host.notifications and "tool/update" not in opted_out
    token = None if "notifications/progress" in opted_out else progress_token

    def make(tg: Owner) -> Listener:
        # Made only when it has something to send: one that is never closed would
        # be left to the collector (its throttle holds its method).
        text = []
        if snapshots or token is not None:
            updates = ToolUpdates(
                notify,
                request_id,
                snapshots=snapshots,
                progress_token=token,
                max_bytes=settings.output.max_bytes,
                owner=tg,
            )
            text.append(updates)
        raw = [RawStream(raw_emitter(notify, request_id), tg)] if terminal else []
        # On a PTY (a host with a UI), the host is told when the command waits for its person.
        return Listener(text=text, raw=raw, on_input=input_emitter(notify) if terminal else None)

    return make
