"""Output extremes: memory stays flat and the final result is well-formed."""

from __future__ import annotations

import os

import msgspec
import pytest

from bashrpc.protocol.methods import BashParams, BashResult
from tests.memory import RSS_GROWTH_LIMIT, PeakRss, rss_bytes
from tests.rpc import ServerProcess


@pytest.fixture
def server(process: ServerProcess) -> ServerProcess:
    """The server's own memory is measured, so it runs as its own process."""
    return process


CONTROL_CHARS = {chr(c) for c in range(32) if chr(c) not in "\t\n"} | {"\x7f", "\r"}


def measured(server: ServerProcess, command: str, **params: object) -> tuple[BashResult, int]:
    """The result of a command and how much the server's RSS grew while it ran."""
    server.bash("true")  # the shell is up: measure the command, not the start
    server.keep_chunks = False
    baseline = rss_bytes(server.pid)
    with PeakRss(server.pid) as rss:
        result = server.bash(command, wait=600, **params)
    server.keep_chunks = True
    return result, rss.peak - baseline


def well_formed(result: BashResult) -> None:
    assert result.output_bytes == len(result.output.encode())
    assert result.output_bytes <= 51200
    assert not CONTROL_CHARS & set(result.output)
    msgspec.json.encode(result)


@pytest.mark.slow
def test_two_gib_without_a_newline(server: ServerProcess) -> None:
    result, growth = measured(server, "head -c 2G /dev/zero | tr '\\0' x")
    well_formed(result)
    assert growth <= RSS_GROWTH_LIMIT
    assert result.total_bytes == 2 << 30 and result.total_lines == 1
    assert result.output == "x" * 51200 and result.exit_code == 0
    artifact = server.artifacts_dir / f"{result.artifact_id}.bash.log"
    assert artifact.stat().st_size == 2 << 30
    os.unlink(artifact)


def test_a_line_of_nothing_but_carriage_returns(server: ServerProcess) -> None:
    result, growth = measured(server, "for i in $(seq 100000); do printf '\\r%d' $i; done")
    well_formed(result)
    assert growth <= RSS_GROWTH_LIMIT
    # Each CR starts the line over: its last state is all that is left.
    assert result.total_lines == 1 and result.output == "100000"


@pytest.mark.slow
def test_binary_from_urandom(server: ServerProcess) -> None:
    # 32 MiB of bytes is about 56 MB of text (U+FFFD is 3 bytes): holding even
    # a third of it would break the growth limit.
    result, growth = measured(server, "head -c 32M /dev/urandom")
    well_formed(result)
    assert growth <= RSS_GROWTH_LIMIT
    assert result.truncated and "\ufffd" in result.output


def test_a_hundred_thousand_tiny_writes(server: ServerProcess) -> None:
    ident = server.request("bash", BashParams(command="for i in $(seq 100000); do echo $i; done"))
    result = server.bash_result(ident, timeout=120)
    well_formed(result)
    assert result.total_lines == 100000 and result.output.endswith("99999\n100000\n")
    chunks = server.chunks_for(ident)
    # Coalescing: one notification per 20 ms at most, so far fewer than the writes.
    assert 1 <= len(chunks) < 5000
    assert "".join(c.text for c in chunks).endswith("100000\n")
