"""Every kind of command request resumes the same way: `bash/attach` on a new
connection replays the notifications the request sent, as they were sent
(byte for byte), then gives its result, whichever surface it came in on."""

from __future__ import annotations

import msgspec
import pytest

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.mcp import BashToolArguments
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashAttachParams, BashParams, BashResult, PtySize
from bashrpc.server.services.tool.toolplan import TOOL_SESSION_ID
from tests.daemon import DaemonProcess, SocketClient, introduce
from tests.e2e.test_resume import drain, requests_of
from tests.rpc import wait_until

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
BOUND_SECONDS = 60.0
COMMAND = "echo one; sleep 1; echo two"
# What a command request may send while it runs.
STREAMED = frozenset({"bash/chunk", "pty/output", "notifications/progress", "tool/update"})


def start(client: SocketClient, kind: str) -> tuple[RequestId, str, str | None]:
    """The request of `kind`: its id, its session, and the notification it sends first
    (None: it sends none)."""
    if kind == "bash":
        return client.request("bash", BashParams(command=COMMAND)), "default", "bash/chunk"
    if kind == "pty":
        params = BashParams(command=COMMAND, pty=PtySize(cols=80, rows=24))
        return client.request("bash", params), "default", "pty/output"
    if kind == "background":
        params = BashParams(command=COMMAND, background_after=BOUND_SECONDS)
        return client.request("bash", params), "default", None
    call = bash_tool_call(BashToolArguments(command=COMMAND), progress_token="kinds")
    return client.request("tools/call", call), TOOL_SESSION_ID, "notifications/progress"


def sent(client: SocketClient) -> list[tuple[str, bytes]]:
    """The notifications a command request sent to `client`, as they came."""
    return [(m.method, bytes(m.params)) for m in client.messages if m.method in STREAMED]


@pytest.mark.parametrize("kind", ["bash", "pty", "tools/call", "background"])
def test_an_attach_replays_what_the_request_sent_as_sent(daemon: DaemonProcess, kind: str) -> None:
    client_id = f"kinds-{kind.replace('/', '-')}"
    first = introduce(daemon.connect(), client_id)
    ident, session, first_sent = start(first, kind)
    if first_sent is None:
        assert wait_until(lambda: [r.state for r in requests_of(first, session)] == ["running"])
    else:
        first.wait_for(lambda m: m.method == first_sent, BOUND_SECONDS)
    first.cut()
    drain(first)
    before = sent(first)
    assert (before == []) is (first_sent is None)
    again = introduce(daemon.connect(), client_id)

    def finished() -> bool:
        return [r.state for r in requests_of(again, session)] == ["finished"]

    assert wait_until(finished, BOUND_SECONDS)
    result = again.typed(
        BashResult, "bash/attach", BashAttachParams(request_id=ident), BOUND_SECONDS
    )
    replayed = sent(again)
    # What the first connection got comes first, exactly; then what it missed.
    assert replayed[: len(before)] == before
    assert {method for method, _ in replayed} <= {first_sent}
    assert result.exit_code == 0
    assert result.output.replace("\r", "").endswith("two\n")
    if kind == "bash":
        texts = [msgspec.json.decode(params)["text"] for _, params in replayed]
        assert "".join(texts) == "one\ntwo\n"
    # Delivered: no longer listed.
    assert requests_of(again, session) == []
    again.close()
