"""The blocking client side of `bashrpc exec`: requests to its child server over
the child's pipes, notifications to a handler, pings while it lives."""

from __future__ import annotations

import subprocess
import threading
from typing import IO, Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.client import ClientCore, Unparsable
from bashrpc.protocol.envelope import ErrorObject, RequestId
from bashrpc.protocol.errors import ErrorCode
from bashrpc.server.cli.keepalive import Keepalive


class ServerError(Exception):
    def __init__(self, text: str, code: int) -> None:
        super().__init__(text)
        self.code = code


class NoAnswer(ServerError):
    """The server ended (or never started) before it answered: its own exit
    status, and what it said on stderr, tell why."""

    def __init__(self) -> None:
        super().__init__(messages.EXEC_NO_ANSWER, ErrorCode.INTERNAL_ERROR)


class Connection:
    """Requests to the child server over its pipes; notifications go to a handler.
    It pings while it lives (see `keepalive`); the replies are passed over."""

    def __init__(self, child: subprocess.Popen[bytes], ping_interval: float) -> None:
        assert child.stdin is not None and child.stdout is not None
        self._in: IO[bytes] = child.stdin
        self._out: IO[bytes] = child.stdout
        self._core = ClientCore()
        # The keepalive thread writes too: one line at a time.
        self._writing = threading.Lock()
        self._keepalive = Keepalive(self._write, ping_interval)

    def _write(self, method: str, params: msgspec.Struct) -> RequestId:
        with self._writing:
            ident, line = self._core.request(method, params)
            self._in.write(line)
            self._in.flush()
        return ident

    def send(self, method: str, params: msgspec.Struct) -> RequestId:
        try:
            return self._write(method, params)
        except BrokenPipeError:
            raise NoAnswer from None

    def wait(self, ident: RequestId, on_notification: Any = None) -> msgspec.Raw:
        """The result of `ident`; notifications on the way go to the handler,
        and other replies (the keepalive's pings) are passed over."""
        for line in self._out:
            [message] = self._core.line(line)
            if isinstance(message, Unparsable):
                text = messages.EXEC_NOT_PROTOCOL.format(reason=message.reason)
                raise ServerError(text, ErrorCode.INTERNAL_ERROR)
            if message.method is not None:
                if on_notification is not None:
                    on_notification(message)
            elif message.id == ident:
                if message.error is not None:
                    raise _server_error(message.error)
                return message.result
        raise NoAnswer

    def close(self) -> None:
        self._keepalive.stop()
        with self._writing:
            try:
                self._in.close()
            except BrokenPipeError:
                pass  # the server is gone already: nothing to tell it


def _server_error(error: ErrorObject) -> ServerError:
    if error.code == ErrorCode.SANDBOX_UNAVAILABLE:
        return ServerError(messages.CLI_ERROR.format(message=error.message), error.code)
    text = messages.EXEC_SERVER_ERROR.format(message=error.message, data=error.data)
    return ServerError(text, error.code)
