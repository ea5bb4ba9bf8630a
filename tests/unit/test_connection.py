"""`Connection` driven over the in-memory pair, on the fake backend: the
request lifecycle (batches, cancels, the in-flight limit, the wind-down and
its flush) with no bash and no process, so each case is exact about order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.client import ClientCore, notification_params, result_of
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import BashToolArguments, CallToolResult, CancelRequestParams, EmptyResult
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import (
    AbortBashParams,
    AbortBashResult,
    BashChunk,
    BashParams,
    BashResult,
    SessionOpenParams,
    SessionOpenResult,
)
from bashrpc.server.connection import MAX_IN_FLIGHT_REQUESTS, Connection
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.instance import Options, Runtime
from bashrpc.server.serve import dispatcher
from bashrpc.server.services.api import Services
from bashrpc.server.settings import Settings
from bashrpc.server.wire.transport import Transport, memory_pair
from tests.fakebackend import FAKE, NO_TERMINALS, FakeBackend
from tests.rpc import request_line

# Generous, to catch a hang: every wait here is for something already under way.
HANG_SECONDS = 10.0
# The fake runs no rc file; enough shells for every request in flight at once.
SETTINGS = "[bash]\nsnapshot = false\n[sessions]\nmaxShells = 300\n"


class Client:
    """The host's end: the protocol's client core over the memory pair, nothing else."""

    def __init__(self, transport: Transport, backend: FakeBackend, workspace: Path) -> None:
        self._transport = transport
        self.backend = backend
        self.workspace = workspace
        self._pending = b""
        self._lines: list[bytes] = []

    async def send(self, *lines: bytes) -> None:
        """All in one write, so the reader sees them without a pause between."""
        await self._transport.send.send(b"".join(lines))

    async def line(self) -> list[ServerMessage]:
        """The messages of the next line: one, or a batch's replies."""
        with anyio.fail_after(HANG_SECONDS):
            while not self._lines:
                self._pending += await self._transport.receive.receive()
                *lines, self._pending = self._pending.split(b"\n")
                self._lines += lines
        received = ClientCore.line(self._lines.pop(0))
        assert all(isinstance(m, ServerMessage) for m in received), received
        return [m for m in received if isinstance(m, ServerMessage)]

    async def receive(self) -> ServerMessage:
        """The next line, which holds one message."""
        (message,) = await self.line()
        return message

    async def until_end(self) -> list[ServerMessage]:
        """Everything still to come, until the server closes its side."""
        received = []
        try:
            while True:
                received.append(await self.receive())
        except anyio.EndOfStream:
            return received

    async def close_input(self) -> None:
        await self._transport.send.aclose()


_encoder = ClientCore()


def bash(ident: int, command: str, **fields: Any) -> bytes:
    return request_line(ident, "bash", BashParams(command=command, **fields))


def batch(*lines: bytes) -> bytes:
    return b"[" + b",".join(line.rstrip(b"\n") for line in lines) + b"]\n"


def bash_result(message: ServerMessage) -> BashResult:
    return result_of(message, BashResult)


def error_code(message: ServerMessage) -> int:
    assert message.error is not None, message
    return message.error.code


@asynccontextmanager
async def connected(tmp: Path) -> AsyncIterator[Client]:
    settings = msgspec.toml.decode(SETTINGS.encode(), type=Settings)
    options = Options(settings, tmp, "/nonexistent/bash", tmp / "artifacts", backend=FAKE)
    server_end, client_end = memory_pair()
    (tmp / "run").mkdir()
    async with Runtime.open(options, tmp / "run", Containment(None)) as runtime:
        assert isinstance(runtime.backend, FakeBackend)
        runtime.backend.files[str(tmp)] = "dir"
        connection = Connection(Services(runtime), dispatcher(), server_end, settings)

        async def serve() -> None:
            try:
                await connection.serve()
            finally:
                await server_end.send.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield Client(client_end, runtime.backend, tmp)
            with anyio.fail_after(HANG_SECONDS):
                await client_end.send.aclose()


def run(tmp: Path, case: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with connected(tmp) as client:
            await case(client)

    anyio.run(main)


def test_a_batch_waits_for_its_slow_member_and_blocks_nothing_else(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        members = [
            bash(1, "wait go"),
            request_line(2, "ping"),
            bash(3, "echo quick", session_id="b"),
        ]
        await client.send(batch(*members), request_line(4, "ping"))
        # The request after the batch is answered while the batch still waits.
        assert (await client.receive()).id == 4
        chunk = await client.receive()
        assert chunk.method == "bash/chunk"
        assert notification_params(chunk, BashChunk).text == "quick\n"
        client.backend.gate("go").set()
        replies = {r.id: r for r in await client.line()}
        assert set(replies) == {1, 2, 3}
        assert result_of(replies[2], EmptyResult) == EmptyResult()
        assert bash_result(replies[1]).exit_code == 0
        assert bash_result(replies[3]).output == "quick\n"

    run(tmp_path, case)


def test_a_cancel_before_the_request_starts_runs_nothing(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        await client.send(
            bash(1, "echo never"), request_line(2, "abort_bash", AbortBashParams(request_id=1))
        )
        replies = {m.id: m for m in [await client.receive(), await client.receive()]}
        assert result_of(replies[2], AbortBashResult).aborted is True
        result = bash_result(replies[1])
        assert result.cancelled is True and result.exit_code is None
        assert client.backend.ran == []

    run(tmp_path, case)


def test_a_cancel_before_a_request_that_runs_no_command_starts_cancels_it(
    tmp_path: Path,
) -> None:
    async def case(client: Client) -> None:
        await client.send(bash(1, "echo started; wait go"))
        assert notification_params(await client.receive(), BashChunk).text == "started\n"
        # One batch: the cancel is read before the shutdown's task starts.
        cancel = _encoder.notification("$/cancelRequest", CancelRequestParams(id=2))
        await client.send(batch(request_line(2, "shutdown"), cancel))
        (refused,) = await client.line()
        assert refused.id == 2 and error_code(refused) == ErrorCode.REQUEST_CANCELLED
        # Nothing was shut down: the command runs on to its end.
        client.backend.gate("go").set()
        assert bash_result(await client.receive()).exit_code == 0

    run(tmp_path, case)


def test_the_request_past_the_in_flight_limit_is_refused_not_queued(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        limit = MAX_IN_FLIGHT_REQUESTS
        await client.send(*(bash(i, "wait go", session_id=f"s{i}") for i in range(limit + 1)))
        refused = await client.receive()
        assert refused.id == limit and error_code(refused) == ErrorCode.SERVER_BUSY
        await client.send(request_line(-1, "ping"))
        assert (await client.receive()).id == -1
        client.backend.gate("go").set()
        done = [await client.receive() for _ in range(limit)]
        assert sorted(m.id for m in done if isinstance(m.id, int)) == list(range(limit))
        assert all(bash_result(m).exit_code == 0 for m in done)
        # The slots are free again.
        await client.send(bash(limit + 1, "true"))
        assert bash_result(await client.receive()).exit_code == 0

    run(tmp_path, case)


def test_shutdown_aborts_and_answers_then_refuses_then_exit_flushes(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        await client.send(bash(1, "echo started; wait never"))
        assert notification_params(await client.receive(), BashChunk).text == "started\n"
        await client.send(request_line(2, "shutdown"))
        replies = {m.id: m for m in [await client.receive(), await client.receive()]}
        assert bash_result(replies[1]).cancelled is True
        assert replies[2].error is None and bytes(replies[2].result) == b"null"
        await client.send(bash(3, "echo late"), _encoder.notification("exit"))
        refused, *rest = await client.until_end()
        assert error_code(refused) == ErrorCode.SHUTTING_DOWN and rest == []
        assert client.backend.ran == ["echo started; wait never"]

    run(tmp_path, case)


def test_the_input_ending_answers_what_runs_before_the_output_closes(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        await client.send(bash(1, "echo started; wait never"))
        assert notification_params(await client.receive(), BashChunk).text == "started\n"
        await client.close_input()
        (reply,) = await client.until_end()
        assert reply.id == 1 and bash_result(reply).cancelled is True
        assert all(shell.dead for shell in client.backend.shells)

    run(tmp_path, case)


def test_cwd_and_terminal_questions_go_to_the_backend(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        client.backend.files[str(tmp_path / "file")] = "other"
        tool = bash_tool_call(BashToolArguments(command="true", cwd="gone"))
        await client.send(
            request_line(1, "tools/call", tool),
            request_line(2, "session/open", SessionOpenParams(cwd="file")),
            bash(3, "true", pty=True),
        )
        replies = {m.id: m for m in [await client.receive() for _ in range(3)]}
        missing = messages.CWD_MISSING.format(path=tmp_path / "gone")
        assert result_of(replies[1], CallToolResult).text == missing
        assert error_code(replies[2]) == ErrorCode.INVALID_PARAMS
        assert NO_TERMINALS in bash_result(replies[3]).output
        assert client.backend.ran == []

    run(tmp_path, case)


def test_a_shell_that_died_is_replaced_on_the_next_lease(tmp_path: Path) -> None:
    async def case(client: Client) -> None:
        await client.send(bash(1, "cd .; exit"))
        died = bash_result(await client.receive())
        await client.send(bash(2, "echo again"))
        await client.receive()  # its chunk
        again = bash_result(await client.receive())
        assert died.shell_restarted is True and again.shell_restarted is False
        assert again.output == "again\n"
        first, second = client.backend.shells
        assert first.dead and not second.dead

    run(tmp_path, case)


def test_whether_a_new_shell_can_enter_the_sessions_directory_is_the_backends(
    tmp_path: Path,
) -> None:
    async def case(client: Client) -> None:
        sub = str(tmp_path / "sub")
        client.backend.files[sub] = "dir"
        await client.send(
            request_line(1, "session/open", SessionOpenParams(session_id="x", cwd="sub"))
        )
        assert result_of(await client.receive(), SessionOpenResult).cwd == sub
        del client.backend.files[sub]
        await client.send(bash(2, "true", session_id="x"))
        result = bash_result(await client.receive())
        gone = messages.SHELL_CWD_GONE.format(cwd=sub, workspace=tmp_path)
        assert result.output == f"{gone}\n" and result.working_dir == str(tmp_path)

    run(tmp_path, case)
