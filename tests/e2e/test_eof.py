"""The end of input: a file of requests is a script, run in order and answered in
full before the server exits; a pipe's end aborts unless `--on-eof finish`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bashrpc.protocol.client import notification_params, result_of
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.mcp import BashToolArguments, CallToolResult, Implementation, InitializeParams
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import (
    ArtifactReadParams,
    ArtifactReadResult,
    BashChunk,
    BashParams,
    BashResult,
)
from tests.rpc import request_line, server_environment

pytestmark = pytest.mark.slow

# A run takes about a second; the bound only catches a hang.
RUN_BOUND_SECONDS = 60.0
RUNS = 20
# More than a result keeps (50 KiB), so it goes to an artifact.
BIG_LINES = 20000

_decode = msgspec.json.Decoder(ServerMessage).decode


def dependent_requests() -> bytes:
    """Each request needs what the ones before it did."""
    lines = [
        request_line(1, "bash", BashParams(command="mkdir -p sub && cd sub")),
        request_line(2, "bash", BashParams(command="X=hello")),
        request_line(3, "bash", BashParams(command='pwd; echo "X=$X"')),
        request_line(4, "bash", BashParams(command="echo failing; false")),
        request_line(5, "bash", BashParams(command=f"seq 1 {BIG_LINES}")),
        request_line(6, "artifact/read", ArtifactReadParams(id=1, offset=0, limit=12)),
        request_line(
            7,
            "initialize",
            InitializeParams(
                protocol_version="2025-06-18", client_info=Implementation(name="t", version="0")
            ),
        ),
        request_line(8, "tools/call", bash_tool_call(BashToolArguments(command="echo tool"))),
        request_line(9, "ping"),
    ]
    return b"".join(lines)


class Transcript(msgspec.Struct, frozen=True):
    """A run's replies in the order they came, and each request's chunks joined
    (their cut points vary), with the run's own directory written as `<ws>`."""

    replies: list[tuple[Any, str]]
    chunks: dict[str, str]


def transcript(stdout: bytes, workspace: Path) -> Transcript:
    replies: list[tuple[Any, str]] = []
    chunks: dict[str, str] = {}
    for line in stdout.splitlines():
        message = _decode(line)
        if message.method == "bash/chunk":
            chunk = notification_params(message, BashChunk)
            key = str(chunk.request_id)
            chunks[key] = chunks.get(key, "") + chunk.text.replace(str(workspace), "<ws>")
        elif message.method is None:
            body = message.result if message.error is None else message.error
            text = msgspec.json.encode(body).decode().replace(str(workspace), "<ws>")
            replies.append((message.id, text))
    return Transcript(replies, chunks)


def run(tmp_path: Path, n: int, requests: bytes, as_file: bool) -> tuple[Transcript, bytes]:
    workspace = tmp_path / f"run-{n:03d}"
    workspace.mkdir()
    argv = [sys.executable, "-m", "bashrpc", "--artifacts-dir", str(workspace / ".artifacts")]
    stdin: dict[str, Any] = {"input": requests}
    if as_file:
        script = workspace / ".requests.jsonl"
        script.write_bytes(requests)
        stdin = {"stdin": open(script, "rb")}
    else:
        argv += ["--on-eof", "finish"]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            cwd=workspace,
            env=server_environment(tmp_path),
            timeout=RUN_BOUND_SECONDS,
            **stdin,
        )
    finally:
        if as_file:
            stdin["stdin"].close()
    assert done.returncode == 0, done.stderr
    return transcript(done.stdout, workspace), done.stdout


def test_a_file_of_dependent_requests_is_answered_in_full_and_in_order(tmp_path: Path) -> None:
    """As a regular file and as a pipe with `--on-eof finish`, every run alike."""
    requests = dependent_requests()
    runs = [run(tmp_path, n, requests, as_file=n % 2 == 0) for n in range(RUNS)]
    first, stdout = runs[0]
    assert [ident for ident, _ in first.replies] == list(range(1, 10))
    by_id = {m.id: m for m in map(_decode, stdout.splitlines()) if m.method is None}
    results = {n: result_of(by_id[n], BashResult) for n in range(1, 6)}
    assert results[3].output.endswith("/sub\nX=hello\n")
    assert results[4].exit_code == 1 and results[4].output == "failing\n"
    big = results[5]
    assert big.exit_code == 0 and big.truncated and big.artifact_id == 1
    assert result_of(by_id[6], ArtifactReadResult).text == "1\n2\n3\n4\n5\n6\n"
    tool = result_of(by_id[8], CallToolResult)
    assert not tool.is_error and tool.text == "tool\n"
    assert first.chunks["5"].endswith(f"{BIG_LINES}\n")
    for n, (other, _) in enumerate(runs[1:], 1):
        assert other == first, f"run {n} differs"


def piped_bash(tmp_path: Path, args: list[str], command: str) -> BashResult:
    """One `bash` request piped to a server run with `args`, then the pipe's end:
    the result the server answered with before it exited."""
    done = subprocess.run(
        [sys.executable, "-m", "bashrpc", *args],
        input=request_line(1, "bash", BashParams(command=command)),
        capture_output=True,
        cwd=tmp_path,
        env=server_environment(tmp_path),
        timeout=RUN_BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return result_of(_decode(done.stdout.splitlines()[-1]), BashResult)


def test_a_pipe_still_aborts_at_its_end_by_default(tmp_path: Path) -> None:
    """MCP's stdio shutdown: the client closes stdin, and what runs is aborted."""
    artifacts = ["--artifacts-dir", str(tmp_path / "artifacts")]
    result = piped_bash(tmp_path, artifacts, "sleep 30; echo finished")
    assert result.cancelled and "finished" not in result.output


def test_the_setting_chooses_finish_for_a_pipe(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text('[server]\nonEof = "finish"\n')
    result = piped_bash(tmp_path, ["--config", str(config)], "sleep 0.5; echo finished")
    assert result.output == "finished\n" and not result.cancelled
