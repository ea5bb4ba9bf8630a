"""bashrpc for a Python host's tests: a pytest plugin (entry point `pytest11`).

- The `bashrpc` fixture: a typed client on a real `bashrpc` server that runs in
  a private temporary workspace, HOME and artifacts directory, stopped after
  the test.
- `verify_transcript(path)`: replay a transcript recorded with `bashrpc record`
  against a fresh server; a mismatch fails the test with the difference,
  request by request and field by field. `pytest --bashrpc-update` rewrites
  the transcripts' expected side instead.

Importing this costs almost nothing: a project that never uses it pays for
no server module, since each is imported where it is first needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    import msgspec

    from bashrpc.protocol.client import ReplyKey
    from bashrpc.protocol.envelope import RequestId, ServerMessage
    from bashrpc.protocol.methods import BashResult

T = TypeVar("T")

UPDATE_OPTION = "--bashrpc-update"
# How long a call waits for its reply by default: only a hang reaches it.
DEFAULT_TIMEOUT = 60.0
_settings: dict[str, bool] = {"update": False}


class TranscriptMismatch(AssertionError):
    """The server said something else than the transcript expects."""


class Client:
    """A real server over its pipes, on the protocol's `ClientCore`: requests
    go out as the protocol's params Structs, results come back as its Structs."""

    def __init__(self, server_args: list[str] | None = None) -> None:
        from bashrpc.protocol.client import ClientCore
        from bashrpc.server.cli.pipeserver import PipeServer
        from bashrpc.server.cli.runroot import RunRoot

        self._root = RunRoot()
        self.workspace: Path = self._root.workspace
        self.home: Path = self._root.home
        self.core = ClientCore()
        self.messages: list[ServerMessage] = []
        # Lines that are not JSON-RPC: a server bug, which `close` reports.
        self.garbage: list[bytes] = []
        # Each request's method by its id, for `reply`'s result type.
        self._methods: dict[ReplyKey | None, str] = {}
        self._log = open(self._root.root / "server.log", "wb")
        self._server = PipeServer(
            self._root.argv(server_args or []),
            self._root.environment(),
            self.workspace,
            self._log,
            self._received,
        )

    def _received(self, line: bytes) -> None:
        from bashrpc.protocol.client import Unparsable

        for message in self.core.line(line):
            if isinstance(message, Unparsable):
                self.garbage.append(line)
            else:
                self.messages.append(message)

    def request(self, method: str, params: msgspec.Struct | None = None) -> RequestId:
        """Send a request without waiting; its id (`reply` gives its result)."""
        import msgspec

        from bashrpc.protocol.client import reply_key

        ident, line = self.core.request(method, msgspec.UNSET if params is None else params)
        self._methods[reply_key(ident)] = method
        self._server.send(line)
        return ident

    def notify(self, method: str, params: msgspec.Struct | None = None) -> None:
        import msgspec

        unset = msgspec.UNSET
        self._server.send(self.core.notification(method, unset if params is None else params))

    def message(self, ident: RequestId, timeout: float = DEFAULT_TIMEOUT) -> ServerMessage:
        """The reply to `ident` as it came (result or error), waited for."""
        found: list[ServerMessage] = []

        def arrived() -> bool:
            found[:] = [m for m in self.messages if m.method is None and m.id == ident]
            return bool(found)

        if not self._server.wait(arrived, timeout):
            raise AssertionError(f"no reply to request {ident!r} within {timeout:g} s")
        return found[0]

    def reply(self, ident: RequestId, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The result of request `ident`, waited for, as the Struct the protocol
        declares for its method (None for a method that answers null); an error
        reply raises `ErrorReply`."""
        from bashrpc.protocol.client import RESULT_TYPES, ErrorReply, reply_key, result_of

        reply = self.message(ident, timeout)
        kind = RESULT_TYPES.get(self._methods.get(reply_key(ident), ""))
        if kind is None:
            if reply.error is not None:
                raise ErrorReply(reply.error)
            return None
        return result_of(reply, kind)

    def call(
        self, method: str, params: msgspec.Struct | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """`request`, then its `reply`."""
        return self.reply(self.request(method, params), timeout)

    def bash(self, command: str, **fields: Any) -> BashResult:
        """Run a command; `fields` are `BashParams`' (session_id, cwd, timeout, env, pty)."""
        from bashrpc.protocol.methods import BashParams, BashResult

        result = self.call("bash", BashParams(command=command, **fields))
        assert isinstance(result, BashResult)
        return result

    def notifications(self, method: str, kind: type[T]) -> list[T]:
        """The params of every `method` notification so far, decoded into `kind`."""
        from bashrpc.protocol.client import notification_params

        return [notification_params(m, kind) for m in self.messages if m.method == method]

    def close(self) -> None:
        self._server.close()
        self._log.close()
        self._root.remove()
        assert not self.garbage, f"the server wrote lines that are not JSON-RPC: {self.garbage}"


def verify_transcript(
    path: str | Path,
    server_args: list[str] | None = None,
    fixture: str | Path | None = None,
    update: bool | None = None,
    trust: bool = False,
) -> None:
    """Replay a transcript against a fresh server; fail with the difference on a
    mismatch. `update` (default: `pytest --bashrpc-update`) rewrites the expected
    side of a transcript that differs. `trust` runs header server arguments that
    could loosen the sandbox, as `bashrpc replay --trust` does."""
    __tracebackhide__ = True
    from bashrpc.protocol.transcript import dumps
    from bashrpc.server.cli.replay import check_trust, fixture_of, load, rewritten
    from bashrpc.server.cli.replayrun import replay

    path = Path(path)
    transcript = load(path)
    if not trust:
        check_trust(path, transcript, server_args)
    given = None if fixture is None else Path(fixture)
    outcome = replay(transcript, server_args, fixture_of(path, transcript, given))
    if outcome.differences and (_settings["update"] if update is None else update):
        path.write_bytes(dumps(rewritten(transcript, outcome)))
        return
    if outcome.differences:
        lines = [f"{path}: the server said something else:", *outcome.differences]
        raise TranscriptMismatch("\n".join(lines))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("bashrpc").addoption(
        UPDATE_OPTION,
        action="store_true",
        default=False,
        help="verify_transcript rewrites each transcript's expected side instead of comparing",
    )


def pytest_configure(config: pytest.Config) -> None:
    _settings["update"] = bool(config.getoption(UPDATE_OPTION, default=False))


@pytest.fixture
def bashrpc() -> Iterator[Client]:
    """A client on a real bashrpc server in a private workspace and HOME."""
    client = Client()
    try:
        yield client
    finally:
        client.close()
