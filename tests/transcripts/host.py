"""A scripted host: it runs `bashrpc record` as a host runs `bashrpc`, and drives it.

Lockstep by default (`call` sends and waits for the reply); `request` sends
without waiting, for the cases where pipelining is the point or a command
must still run while the host talks to it (abort, PTY input). The recording
runs in a fresh root of its own, as a replay does.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import msgspec

from bashrpc.protocol.client import ClientCore, Unparsable, notification_params
from bashrpc.protocol.envelope import RequestId, ServerMessage
from bashrpc.protocol.methods import BashChunk, PtyOutput
from bashrpc.server.cli.pipeserver import PipeServer
from bashrpc.server.cli.replayrun import stop_daemon
from bashrpc.server.cli.runroot import DAEMON_BRIDGE, RunRoot

# How long the host waits for anything; only a hang reaches it.
WAIT_SECONDS = 60.0
NO_PARAMS = msgspec.UNSET


class _AboutRequest(msgspec.Struct, rename="camel"):
    request_id: RequestId | None = None


class HostError(Exception):
    """The server did not say what the script waits for."""


class Host:
    def __init__(
        self,
        out: Path,
        server_args: list[str] | None = None,
        fixture: Path | None = None,
        record_args: list[str] | None = None,
    ) -> None:
        self.server_args = server_args or []
        self.root = RunRoot(fixture)
        self.core = ClientCore()
        self.messages: list[ServerMessage] = []
        # Every line as the host got it, for the check that record changes none.
        self.lines: list[bytes] = []
        own = self.root.argv(self.server_args)[3:]  # after `python -m bashrpc`
        argv = [sys.executable, "-m", "bashrpc", "record", "--out", str(out)]
        argv += [*(record_args or []), "--", *own]
        self._log = open(self.root.root / "record.log", "wb")
        self.server = PipeServer(
            argv, self.root.environment(), self.root.workspace, self._log, self._received
        )

    def _received(self, line: bytes) -> None:
        self.lines.append(line)
        for message in self.core.line(line):
            if not isinstance(message, Unparsable):
                self.messages.append(message)

    def __enter__(self) -> Host:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- sending ----------------------------------------------------------------

    def request(
        self,
        method: str,
        params: msgspec.Struct | msgspec.UnsetType = NO_PARAMS,
        id: RequestId | None = None,
    ) -> RequestId:
        ident, line = self.core.request(method, params, id)
        self.server.send(line)
        return ident

    def notify(self, method: str, params: msgspec.Struct | msgspec.UnsetType = NO_PARAMS) -> None:
        self.server.send(self.core.notification(method, params))

    def call(
        self,
        method: str,
        params: msgspec.Struct | msgspec.UnsetType = NO_PARAMS,
        id: RequestId | None = None,
    ) -> ServerMessage:
        return self.reply(self.request(method, params, id))

    def raw(self, line: bytes, replies: int = 1) -> list[ServerMessage]:
        """Send a line as is (bad input, a batch) and wait for `replies` more replies."""
        before = len(self._replies())
        self.server.send(line)
        self._until(lambda: len(self._replies()) >= before + replies, f"reply to {line!r}")
        return self._replies()[before:]

    # -- waiting ----------------------------------------------------------------

    def _replies(self) -> list[ServerMessage]:
        return [m for m in self.messages if m.method is None]

    def _until(self, condition: Callable[[], bool], what: str) -> None:
        if not self.server.wait(condition, WAIT_SECONDS):
            raise HostError(f"no {what} from the server")

    def reply(self, ident: RequestId) -> ServerMessage:
        found: list[ServerMessage] = []

        def arrived() -> bool:
            found[:] = [m for m in self._replies() if m.id == ident]
            return bool(found)

        self._until(arrived, f"reply to {ident!r}")
        return found[0]

    def output(self, ident: RequestId) -> str:
        """What a request has streamed so far (PTY bytes as text)."""
        text = ""
        for message in self.messages:
            if message.method == "bash/chunk":
                chunk = notification_params(message, BashChunk)
                text += chunk.text if chunk.request_id == ident else ""
            elif message.method == "pty/output":
                out = notification_params(message, PtyOutput)
                if out.request_id == ident:
                    text += base64.b64decode(out.data).decode(errors="replace")
        return text

    def output_has(self, ident: RequestId, text: str) -> None:
        self._until(lambda: text in self.output(ident), f"{text!r} in the output of {ident!r}")

    def notified(self, method: str, count: int = 1) -> None:
        """Wait for `count` `method` notifications about no request (`terminal/exited`)."""
        self._until(lambda: sum(m.method == method for m in self.messages) >= count, method)

    def notified_for(self, method: str, ident: RequestId) -> None:
        """Wait for a `method` notification about request `ident`."""

        def about(message: ServerMessage) -> bool:
            if message.method != method:
                return False
            return notification_params(message, _AboutRequest).request_id == ident

        self._until(lambda: any(about(m) for m in self.messages), f"{method} for {ident!r}")

    def close(self) -> None:
        self.server.close()
        if self.server_args[:1] == [DAEMON_BRIDGE]:
            stop_daemon(self.root.socket)
        self._log.close()
        self.root.remove()
