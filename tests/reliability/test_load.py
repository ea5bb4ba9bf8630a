"""Load and backpressure: many sessions at once, a client that stops reading, and
what a finished request leaves in memory."""

from __future__ import annotations

import gc
import hashlib
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from bashrpc.protocol.client import ClientCore, Unparsable, result_of
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.mcp import BashToolArguments, CallToolResult
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashChunk, BashParams, BashResult
from bashrpc.server.output.artifactroot import workspace_key
from bashrpc.server.output.chunks import CLIENT_STALL_SECONDS
from tests.inprocess import InProcessServer
from tests.memory import RSS_GROWTH_LIMIT, PeakRss, rss_bytes

SESSIONS = 16
COMMANDS_PER_SESSION = 200


@pytest.mark.slow
def test_sixteen_sessions_two_hundred_commands_each(server: InProcessServer) -> None:
    expected: dict[str, tuple[str, str]] = {}
    for round_ in range(COMMANDS_PER_SESSION):
        idents = []
        lines: list[bytes] = []
        for s in range(SESSIONS):
            session = f"load-{s}"
            ident = f"{session}/{round_}"
            command = f'n={round_}; echo "{session} $((n * 2))"'
            params = BashParams(command=command, session_id=session)
            lines.append(server.core.request("bash", params, id=ident)[1])
            expected[ident] = (session, f"{session} {round_ * 2}\n")
            idents.append(ident)
        # A round's requests in one write, as a client with a queue of them sends them.
        server.send_raw(b"".join(lines))
        for ident in idents:
            reply = server.response(ident)
            assert reply.error is None and reply.result, reply
            result = result_of(reply, BashResult)
            assert result.output == expected[ident][1] and result.exit_code == 0
    chunks = server.notified("bash/chunk", BashChunk)
    assert len(expected) == SESSIONS * COMMANDS_PER_SESSION
    for chunk in chunks:
        session, output = expected[str(chunk.request_id)]
        assert chunk.session_id == session  # no cross-talk
        assert chunk.text in output
    errors = [m for m in server.messages if m.error is not None]
    assert errors == []


# Twice the time after which a stalled client starts losing chunks: long enough
# for skipping to engage on every command, the case that bounds memory.
STALL_SECONDS = 2 * CLIENT_STALL_SECONDS
# The warm-up command's request id.
WARM_UP_ID = 0
# Commands of each surface run with the cycle collector off.
UNCOLLECTED_COMMANDS = 20


def test_finished_commands_leave_nothing_for_the_cycle_collector(
    server: InProcessServer,
) -> None:
    """A request's objects (its flight, execution, pipeline, streams, FIFO reader)
    are freed as it ends, and a shell's (its wire, status channel) as it ends.
    Left in a cycle, each command's would wait for the collector: memory no
    later command reuses while it is still warm, and a collection every few
    commands."""
    call = bash_tool_call(BashToolArguments(command="echo tool"))
    server.bash("echo warm")
    server.typed(CallToolResult, "tools/call", call)
    gc.collect()
    gc.disable()
    try:
        for _ in range(UNCOLLECTED_COMMANDS):
            assert server.bash("echo bash").output == "bash\n"
            assert server.typed(CallToolResult, "tools/call", call).text == "tool\n"
            # The session's shell ends with this command; the next starts another.
            assert server.bash("exit 3").exit_code == 3
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = sorted(
            {type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("bashrpc.")}
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []


def read_message(stdout: IO[bytes]) -> ServerMessage:
    """The server's next line, decoded; a line that is not one JSON-RPC message fails
    the test."""
    (message,) = ClientCore.line(stdout.readline())
    assert not isinstance(message, Unparsable), message
    return message


@pytest.mark.slow
def test_client_that_stops_reading_for_a_while(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bashrpc", "--artifacts-dir", str(tmp_path / "a")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    commands = {i: f"seq {i} 2000000" for i in range(1, 5)}
    core = ClientCore()
    try:
        # A first command answered: the baseline is a running server's, not a starting one's.
        proc.stdin.write(core.request("bash", BashParams(command="true"), id=WARM_UP_ID)[1])
        proc.stdin.flush()
        while read_message(proc.stdout).id != WARM_UP_ID:
            pass
        for ident, command in commands.items():
            params = BashParams(command=command, session_id=f"heavy-{ident}")
            proc.stdin.write(core.request("bash", params, id=ident)[1])
        proc.stdin.flush()
        time.sleep(0.5)
        baseline = rss_bytes(proc.pid)
        with PeakRss(proc.pid) as rss:
            time.sleep(STALL_SECONDS)  # not reading at all
        assert rss.peak - baseline <= RSS_GROWTH_LIMIT
        assert proc.poll() is None
        results: dict[object, BashResult] = {}
        started = time.monotonic()
        while len(results) < len(commands):
            assert time.monotonic() - started < 120, "responses did not all arrive"
            message = read_message(proc.stdout)
            if message.method is None:
                results[message.id] = result_of(message, BashResult)
    finally:
        proc.kill()
        proc.wait()
    for ident, command in commands.items():
        expected = subprocess.run(command.split(), capture_output=True, check=True).stdout
        result = results[ident]
        assert result.exit_code == 0 and result.total_bytes == len(expected)
        artifact = tmp_path / "a" / workspace_key(tmp_path) / f"{result.artifact_id}.bash.log"
        assert hashlib.sha256(artifact.read_bytes()).digest() == hashlib.sha256(expected).digest()
