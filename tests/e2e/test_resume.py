"""Resume: `bash/attach` on a new connection gets a cut request's output and result."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.client import result_of
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import BashToolArguments, ProgressParams
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import (
    DEFAULT_SESSION_ID,
    BashAttachParams,
    BashParams,
    BashResult,
    RequestInfo,
)
from bashrpc.server.services.tool.toolplan import TOOL_SESSION_ID
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
    # The replay reaches the command's pause, and the request is still running. (The
    # first connection may have had everything up to the pause before its cut: then
    # the replay is empty, and what was seen before ends there.)
    again.receive_until(
        lambda: "".join(c.text for c in before + again.chunks_for(ident)).endswith("\n200000\n"),
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


def test_a_tool_call_cut_resumes_with_its_result_and_its_progress_in_order(
    daemon: DaemonProcess,
) -> None:
    first = introduce(daemon.connect(), "tool-resumer")
    first.bash("export KEPT=yes", session_id=TOOL_SESSION_ID)
    command = 'for i in 1 2 3 4 5 6; do echo "step-$i $KEPT"; sleep 0.3; done'
    call = bash_tool_call(BashToolArguments(command=command), progress_token="resume-me")
    ident = first.request("tools/call", call)
    first.wait_for(lambda m: m.method == "notifications/progress")
    first.cut()
    before = first.notified("notifications/progress", ProgressParams)
    again = introduce(daemon.connect(), "tool-resumer")
    listed = requests_of(again, TOOL_SESSION_ID)
    assert [(r.request_id, r.method) for r in listed] == [(ident, "tools/call")]
    result = again.typed(
        BashResult, "bash/attach", BashAttachParams(request_id=ident), STREAM_BOUND_SECONDS
    )
    steps = "".join(f"step-{i} yes\n" for i in range(1, 7))
    assert result.exit_code == 0 and result.output == steps and result.tool_text == steps
    # Every progress notification from the first, in order, the cut ones included.
    replayed = again.notified("notifications/progress", ProgressParams)
    assert replayed[: len(before)] == before
    assert [p.progress for p in replayed] == sorted(p.progress for p in replayed)
    assert all(p.progress_token == "resume-me" for p in replayed)
    # Delivered: no longer listed.
    assert requests_of(again, TOOL_SESSION_ID) == []
    again.close()


# A small budget for what cut requests keep, and three that print more than it.
RESUME_BUDGET_BYTES = 2 * 1024 * 1024
CUT_REQUESTS = 3
CUT_OUTPUT_LINES = 300000
# How the notice of chunks no longer kept ends (its count varies).
GAP_NOTICE_END = messages.NOTICE_RESUME_MISSED.rpartition("}")[2]
# The newest chunk of each is kept, whatever the budget; a chunk is far below this.
CHUNK_SLACK_BYTES = 256 * 1024


def test_cut_requests_share_the_daemons_budget_and_a_resume_is_told_the_gap(
    tmp_path: Path,
) -> None:
    config = tmp_path / "budget.toml"
    config.write_text(f"[daemon]\nresumeBudgetBytes = {RESUME_BUDGET_BYTES}\n")
    daemon = DaemonProcess("--config", str(config), tmp=tmp_path).wait_listening()
    expected = subprocess.run(["seq", "1", str(CUT_OUTPUT_LINES)], capture_output=True).stdout
    try:
        first = introduce(daemon.connect(), "hog")
        command = f"sleep 0.5; seq 1 {CUT_OUTPUT_LINES}"
        idents = [
            first.request("bash", BashParams(command=command, session_id=f"s{index}"))
            for index in range(CUT_REQUESTS)
        ]
        first.cut()  # before any output: all of it is kept for a resume, within the budget
        again = introduce(daemon.connect(), "hog")

        def finished() -> bool:
            states = [r.state for i in range(CUT_REQUESTS) for r in requests_of(again, f"s{i}")]
            return states == ["finished"] * CUT_REQUESTS

        assert wait_until(finished, STREAM_BOUND_SECONDS)
        replayed = []
        for ident in idents:
            # A host that can live with the gap says so; the first chunk then tells it.
            attach = BashAttachParams(request_id=ident, accept_gap=True)
            reply = again.request("bash/attach", attach)
            result = result_of(again.response(reply, STREAM_BOUND_SECONDS), BashResult)
            assert (result.exit_code, result.total_bytes) == (0, len(expected))
            replayed.append("".join(c.text for c in again.chunks_for(ident)))
        again.close()
    finally:
        daemon.kill()
    kept = 0
    for text in replayed:
        _, notice, tail = text.rpartition(GAP_NOTICE_END)
        # What is kept is the output's end, whole; what is not is said, not silently skipped.
        assert expected.endswith(tail.encode())
        assert notice or tail.encode() == expected
        kept += len(tail)
    assert any(len(text) < len(expected) for text in replayed)
    assert kept <= RESUME_BUDGET_BYTES + CUT_REQUESTS * CHUNK_SLACK_BYTES


def test_a_request_waiting_for_its_turn_is_listed_queued_then_running(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    client = introduce(daemon.connect(), "queuer")
    gate = tmp_path / "gate"
    first = client.request("bash", BashParams(command=f"until [ -e {gate} ]; do sleep 0.05; done"))
    second = client.request(
        "bash", BashParams(command=f"until [ -e {gate}2 ]; do sleep 0.05; done")
    )

    def states() -> dict[object, str]:
        return {r.request_id: r.state for r in requests_of(client)}

    assert wait_until(lambda: states() == {first: "running", second: "queued"}, 20)
    gate.touch()
    client.bash_result(first, STREAM_BOUND_SECONDS)
    assert wait_until(lambda: states() == {second: "running"}, 20)
    (tmp_path / "gate2").touch()
    assert client.bash_result(second, STREAM_BOUND_SECONDS).exit_code == 0
    client.close()
