"""Resume on a PTY: `bash/attach` replays `pty/output` by seq, and a new
connection of the same client reaches the PTY's screen, input and size."""

from __future__ import annotations

import base64
import signal
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.client import result_of
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import (
    BashAttachParams,
    BashParams,
    BashResult,
    PtyInputParams,
    PtyOutput,
    PtyResizeParams,
    PtyResizeResult,
    PtyScreen,
    PtyScreenParams,
    PtySize,
)
from tests.daemon import AttachProcess, DaemonProcess, introduce
from tests.e2e.test_resume import drain, requests_of
from tests.rpc import RpcClient, wait_until

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
STREAM_BOUND_SECONDS = 120.0
LINES = 200
# Numbered lines, slowly, then a question.
COUNT_THEN_ASK = f"for i in $(seq 1 {LINES}); do echo line$i; sleep 0.02; done; read x; echo got:$x"
ROWS = 10


def outputs(client: RpcClient, ident: RequestId) -> list[PtyOutput]:
    return [p for p in client.notified("pty/output", PtyOutput) if p.request_id == ident]


def raw(pieces: list[PtyOutput]) -> bytes:
    return b"".join(base64.b64decode(p.data) for p in pieces)


def counted(upto: int) -> bytes:
    """What the PTY shows of the count: CRLF line ends."""
    return b"".join(f"line{i}\r\n".encode() for i in range(1, upto + 1))


def test_a_pty_request_cut_by_a_killed_bridge_resumes_whole(
    tmp_path: Path, socket_path: Path
) -> None:
    first = introduce(AttachProcess(tmp=tmp_path, socket_path=socket_path), "pty-resumer")
    try:
        pty = PtySize(cols=80, rows=ROWS)
        ident = first.request("bash", BashParams(command=COUNT_THEN_ASK, pty=pty))
        first.receive_until(lambda: b"line20\r\n" in raw(outputs(first, ident)))
        first.pause_reading()
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        first.resume_reading()
        drain(first)
    finally:
        first.kill()
    before = outputs(first, ident)
    assert [p.seq for p in before] == list(range(len(before)))
    assert b"line%d\r\n" % LINES not in raw(before)
    again = introduce(AttachProcess(tmp=tmp_path, socket_path=socket_path), "pty-resumer")
    try:
        [listed] = requests_of(again)
        assert (listed.request_id, listed.method, listed.pty) == (ident, "bash", True)
        assert listed.state == "running"
        attach = again.request(
            "bash/attach", BashAttachParams(request_id=ident, after_seq=before[-1].seq)
        )
        again.receive_until(
            lambda: counted(LINES) in raw(before + outputs(again, ident)), STREAM_BOUND_SECONDS
        )
        # The screen was fed while no one was attached: it shows the count's end.
        screen = again.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
        shown = [f"line{i}" for i in range(LINES - ROWS + 2, LINES + 1)]
        assert screen.lines == [*shown, ""]
        again.result("pty/input", PtyInputParams(request_id=ident, data="yes", keys=["enter"]))
        reply = again.response(attach, STREAM_BOUND_SECONDS)
        result = result_of(reply, BashResult)
        after = outputs(again, ident)
        assert [p.seq for p in before + after] == list(range(len(before) + len(after)))
        # What a run without a cut shows: each line once, in order, then the answer.
        assert raw(before + after) == counted(LINES) + b"yes\r\ngot:yes\r\n"
        assert result.exit_code == 0
        text = "".join(f"line{i}\n" for i in range(1, LINES + 1))
        assert result.output == text + "yes\ngot:yes\n"
        assert requests_of(again) == []
    finally:
        again.kill()


def test_another_client_cannot_reach_a_pty_its_own_next_connection_can(
    daemon: DaemonProcess,
) -> None:
    owner = introduce(daemon.connect(), "pty-owner")
    ident = owner.request("bash", BashParams(command="echo ready; read x; echo got:$x", pty=True))
    owner.receive_until(lambda: b"ready\r\n" in raw(outputs(owner, ident)))
    owner.cut()
    stranger = introduce(daemon.connect(), "pty-stranger")
    anonymous = daemon.connect()
    reaches: list[tuple[str, msgspec.Struct]] = [
        ("pty/screen", PtyScreenParams(request_id=ident)),
        ("pty/input", PtyInputParams(request_id=ident, data="no\n")),
        ("pty/resize", PtyResizeParams(request_id=ident, cols=50, rows=20)),
    ]
    for client in (stranger, anonymous):
        for method, params in reaches:
            error = client.error(method, params)
            assert error.code == ErrorCode.NO_SUCH_PTY, (method, error)
    again = introduce(daemon.connect(), "pty-owner")
    resized = again.typed(
        PtyResizeResult, "pty/resize", PtyResizeParams(request_id=ident, cols=50, rows=12)
    )
    assert resized.cols == 50
    screen = again.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
    assert (screen.cols, screen.rows) == (50, 12) and screen.lines[0] == "ready"
    again.result("pty/input", PtyInputParams(request_id=ident, data="yes\n"))
    assert wait_until(lambda: [r.state for r in requests_of(again)] == ["finished"], 20)
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.output == "ready\nyes\ngot:yes\n"
    for client in (stranger, anonymous, again):
        client.close()


def test_a_pty_request_that_finished_while_detached_answers_at_once(
    daemon: DaemonProcess,
) -> None:
    first = introduce(daemon.connect(), "pty-late")
    ident = first.request("bash", BashParams(command="echo one; sleep 1; echo two", pty=True))
    first.wait_for(lambda m: m.method == "pty/output")
    first.cut()
    again = introduce(daemon.connect(), "pty-late")
    assert wait_until(lambda: [r.state for r in requests_of(again)] == ["finished"], 20)
    [listed] = requests_of(again)
    assert listed.request_id == ident and listed.pty is True
    # Its program is gone: no screen to show, but its output and result are kept.
    no_screen = again.error("pty/screen", PtyScreenParams(request_id=ident))
    assert no_screen.code == ErrorCode.NO_SUCH_PTY
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.output == "one\ntwo\n"
    replayed = outputs(again, ident)
    assert [p.seq for p in replayed] == list(range(listed.seq))
    assert raw(replayed) == b"one\r\ntwo\r\n"
    assert not again.notifications("bash/chunk")
    again.close()
