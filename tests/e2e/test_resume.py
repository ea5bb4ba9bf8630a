"""Resume: `bash/attach` on a new connection gets a cut request's output and result."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import pytest

from bashrpc.protocol.client import result_of
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import (
    DEFAULT_SESSION_ID,
    BashAttachParams,
    BashParams,
    BashResult,
    RequestInfo,
)
from tests.daemon import (
    AttachProcess,
    DaemonProcess,
    introduce,
)
from tests.rpc import RpcClient, wait_until

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
STREAM_BOUND_SECONDS = 120.0


def drain(client: RpcClient) -> None:
    """Take in everything the client got before its stream ended."""
    try:
        while True:
            client.next_message(timeout=10)
    except (EOFError, TimeoutError):
        pass


def requests_of(client: RpcClient, session_id: str = DEFAULT_SESSION_ID) -> list[RequestInfo]:
    """The session's requests that `bash/attach` can resume (none: no such session)."""
    session = client.sessions().get(session_id)
    return [] if session is None else list(session.requests or [])


def test_a_stream_cut_by_a_killed_bridge_resumes_whole(tmp_path: Path, socket_path: Path) -> None:
    first = introduce(AttachProcess(tmp=tmp_path, socket_path=socket_path), "resumer")
    try:
        first.bash("export KEPT=yes; cd /tmp")
        ident = first.request("bash", BashParams(command="seq 1 2000000"))
        first.receive_until(lambda: len(first.chunks_for(ident)) >= 20, STREAM_BOUND_SECONDS)
        first.pause_reading()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        first.resume_reading()
        drain(first)
    finally:
        first.kill()
    before = first.chunks_for(ident)
    assert [c.seq for c in before] == list(range(len(before)))
    again = introduce(AttachProcess(tmp=tmp_path, socket_path=socket_path), "resumer")
    try:
        listed = requests_of(again)
        assert [(r.request_id, r.method) for r in listed] == [(ident, "bash")]
        reply = again.response(
            again.request(
                "bash/attach", BashAttachParams(request_id=ident, after_seq=before[-1].seq)
            ),
            STREAM_BOUND_SECONDS,
        )
        result = result_of(reply, BashResult)
        after = again.chunks_for(ident)
        assert [c.seq for c in after] == list(range(len(before), len(before) + len(after)))
        assert all(c.skipped == 0 for c in before + after)
        streamed = "".join(c.text for c in before + after).encode()
        expected = subprocess.run(["seq", "1", "2000000"], capture_output=True).stdout
        assert hashlib.sha256(streamed).hexdigest() == hashlib.sha256(expected).hexdigest()
        assert result.exit_code == 0
        assert result.total_bytes == len(expected)
        # Delivered: no longer listed; the shell kept what was set before the cut.
        assert requests_of(again) == []
        assert again.bash('echo "$KEPT"; pwd').output == "yes\n/tmp\n"
    finally:
        again.kill()


def test_a_request_that_finished_while_detached_answers_at_once(daemon: DaemonProcess) -> None:
    first = introduce(daemon.connect(), "late")
    ident = first.request("bash", BashParams(command="echo one; sleep 1; echo two"))
    first.wait_for(lambda m: m.method == "bash/chunk")
    first.cut()
    again = introduce(daemon.connect(), "late")
    assert wait_until(lambda: [r.state for r in requests_of(again)] == ["finished"], 20)
    [listed] = requests_of(again)
    assert listed.request_id == ident
    assert listed.seq == 2
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.output == "one\ntwo\n"
    assert "".join(c.text for c in again.chunks_for(ident)) == "one\ntwo\n"
    # Delivered once: it is gone now.
    error = again.error("bash/attach", BashAttachParams(request_id=ident))
    assert error.code == ErrorCode.INVALID_PARAMS
    again.close()


def test_an_unknown_request_and_another_clients_are_refused(daemon: DaemonProcess) -> None:
    owner = introduce(daemon.connect(), "owner")
    ident = owner.request("bash", BashParams(command="sleep 30"))
    assert wait_until(lambda: [r.request_id for r in requests_of(owner)] == [ident])
    stranger = introduce(daemon.connect(), "stranger")
    for client, request_id in ((owner, 999), (stranger, ident)):
        error = client.error("bash/attach", BashAttachParams(request_id=request_id))
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "no request" in error.message + str(error.data)
    anonymous = daemon.connect()
    error = anonymous.error("bash/attach", BashAttachParams(request_id=ident))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert owner.abort(request_id=ident)
    for client in (owner, stranger, anonymous):
        client.close()


def test_a_reused_id_on_the_new_connection_leaves_the_held_request_alone(
    daemon: DaemonProcess,
) -> None:
    first = introduce(daemon.connect(), "reuse")
    first.request("bash", BashParams(command="echo held; sleep 1"), id=7)
    first.wait_for(lambda m: m.method == "bash/chunk")
    first.cut()
    again = introduce(daemon.connect(), "reuse")
    fresh = again.bash_result(again.request("bash", BashParams(command="echo fresh"), id=7))
    assert fresh.output == "fresh\n"
    held = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=7), timeout=20)
    assert held.output == "held\n"
    again.close()


def test_an_attach_replays_then_follows_a_command_still_running(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    command = f"seq 1 200000; until [ -e {go} ]; do sleep 0.05; done; seq 200001 400000"
    first = introduce(daemon.connect(), "follower")
    ident = first.request("bash", BashParams(command=command))
    first.receive_until(lambda: len(first.chunks_for(ident)) >= 3, STREAM_BOUND_SECONDS)
    first.cut()
    drain(first)
    before = first.chunks_for(ident)
    again = introduce(daemon.connect(), "follower")
    attach = again.request(
        "bash/attach", BashAttachParams(request_id=ident, after_seq=before[-1].seq)
    )
    # The replay reaches the command's pause, and the request is still running.
    again.receive_until(
        lambda: "".join(c.text for c in again.chunks_for(ident)).endswith("\n200000\n"),
        STREAM_BOUND_SECONDS,
    )
    assert [r.state for r in requests_of(again)] == ["running"]
    go.touch()
    result = result_of(again.response(attach, STREAM_BOUND_SECONDS), BashResult)
    chunks = before + again.chunks_for(ident)
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    expected = subprocess.run(["seq", "1", "400000"], capture_output=True).stdout
    assert "".join(c.text for c in chunks).encode() == expected
    assert result.exit_code == 0
    again.close()
