"""The client core, sans I/O: the lines it writes are what the server's own
decoder reads, and what it makes of the server's bytes does not depend on
where a read cut them."""

from __future__ import annotations

import msgspec
import pytest

from bashrpc.protocol.client import (
    RESULT_TYPES,
    ClientCore,
    ErrorReply,
    Replies,
    Unparsable,
    notification_params,
    reply_key,
    result_of,
)
from bashrpc.protocol.envelope import (
    Call,
    Notification,
    ServerMessage,
    SuccessResponse,
    encode,
    error_response,
    parse_line,
)
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import BashToolArguments, HostOptions, InitializeParams, ToolsCallParams
from bashrpc.protocol.mcpclient import bash_tool_call, initialize_params
from bashrpc.protocol.methods import METHODS, BashChunk, BashParams, BashResult, SessionListResult

RESULT = BashResult(
    output="hi\n",
    exit_code=0,
    cancelled=False,
    timed_out=False,
    truncated=False,
    total_lines=1,
    total_bytes=3,
    output_lines=1,
    output_bytes=3,
    working_dir="/w",
)
CHUNK = BashChunk(request_id=1, session_id="default", seq=0, text="hi\n")
# What a server writes for one command: a chunk, then the reply.
STREAM = encode(Notification(method="bash/chunk", params=CHUNK)) + encode(
    SuccessResponse(id=1, result=RESULT)
)


def _decoded(line: bytes) -> Call:
    [call], is_batch = parse_line(line.rstrip(b"\n"))
    assert isinstance(call, Call) and not is_batch
    return call


def test_requests_are_numbered_and_read_back_by_the_servers_decoder() -> None:
    core = ClientCore()
    first, line = core.request("bash", BashParams(command="echo hi", session_id="a"))
    second, _ = core.request("ping")
    assert (first, second) == (1, 2)
    call = _decoded(line)
    assert call.id == 1 and call.method == "bash"
    assert msgspec.json.decode(call.params, type=BashParams) == BashParams(
        command="echo hi", session_id="a"
    )


def test_params_leave_out_what_was_not_set() -> None:
    _, line = ClientCore().request("bash", BashParams(command="true"))
    assert bytes(_decoded(line).params) == b'{"command":"true"}'
    _, bare = ClientCore().request("ping")
    assert b"params" not in bare


def test_an_id_given_is_kept_and_a_notification_has_none() -> None:
    _, line = ClientCore().request("ping", id="mine")
    assert _decoded(line).id == "mine"
    assert _decoded(ClientCore().notification("exit")).is_notification


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_a_read_cut_anywhere_gives_the_same_messages(cut: int) -> None:
    core = ClientCore()
    received = core.feed(STREAM[:cut]) + core.feed(STREAM[cut:]) + core.end()
    chunk, reply = received
    assert isinstance(chunk, ServerMessage) and isinstance(reply, ServerMessage)
    assert chunk.method == "bash/chunk" and chunk.id is msgspec.UNSET
    assert notification_params(chunk, BashChunk) == CHUNK
    assert reply.method is None and reply.id == 1 and result_of(reply, BashResult) == RESULT


def test_a_last_line_without_its_newline_still_counts() -> None:
    core = ClientCore()
    [chunk] = core.feed(STREAM.rstrip(b"\n"))
    assert isinstance(chunk, ServerMessage) and chunk.method == "bash/chunk"
    [reply] = core.end()
    assert isinstance(reply, ServerMessage) and reply.id == 1


def test_a_batch_reply_is_its_members_in_order() -> None:
    members = b",".join(encode(SuccessResponse(id=n, result=None)).rstrip() for n in (2, 1))
    received = ClientCore.line(b"[" + members + b"]")
    assert [m.id for m in received if isinstance(m, ServerMessage)] == [2, 1]


def test_a_null_id_is_told_from_an_absent_one() -> None:
    line = encode(error_response(ErrorCode.PARSE_ERROR, "Parse error"))
    [reply] = ClientCore.line(line)
    assert isinstance(reply, ServerMessage) and reply.id is None
    assert reply.error is not None and reply.error.code == ErrorCode.PARSE_ERROR


def test_what_is_not_json_rpc_is_reported_not_raised() -> None:
    [bad] = ClientCore.line(b"login banner")
    assert isinstance(bad, Unparsable) and bad.line == b"login banner" and bad.reason
    core = ClientCore(max_line_bytes=8)
    [oversized] = core.feed(b"x" * 20 + b"\n")
    assert isinstance(oversized, Unparsable) and "20 bytes" in oversized.reason


def test_an_error_reply_raises_where_a_result_was_expected() -> None:
    [reply] = ClientCore.line(encode(error_response(ErrorCode.SERVER_BUSY, "busy", id=3)))
    assert isinstance(reply, ServerMessage)
    with pytest.raises(ErrorReply) as raised:
        result_of(reply, BashResult)
    assert raised.value.error.code == ErrorCode.SERVER_BUSY


def test_replies_are_taken_once_in_order_by_id_and_its_json_type() -> None:
    replies = Replies()
    messages = [ServerMessage(jsonrpc="2.0", id=ident) for ident in (1, "1", 1)]
    assert all(replies.put(m) for m in messages)
    assert not replies.put(ServerMessage(jsonrpc="2.0", method="bash/chunk"))
    assert not replies.put(ServerMessage(jsonrpc="2.0", id=None))
    assert replies.take(1) is messages[0] and replies.take(1) is messages[2]
    assert replies.take(1) is None and replies.take(True) is None
    assert replies.take("1") is messages[1]
    assert reply_key(1) != reply_key(True) and reply_key(1.0) is None


def test_every_method_has_its_result_type() -> None:
    assert RESULT_TYPES["session/list"] is SessionListResult
    assert RESULT_TYPES["shutdown"] is None
    assert set(METHODS) <= set(RESULT_TYPES)


def test_the_mcp_requests_are_what_the_server_decodes() -> None:
    options = HostOptions(client_id="me")
    _, line = ClientCore().request("initialize", initialize_params(options))
    params = msgspec.json.decode(_decoded(line).params, type=InitializeParams)
    assert params.initialization_options == options
    call = bash_tool_call(BashToolArguments(command="ls", tail=5), progress_token="t")
    _, line = ClientCore().request("tools/call", call)
    sent = msgspec.json.decode(_decoded(line).params, type=ToolsCallParams)
    assert msgspec.json.decode(sent.arguments, type=BashToolArguments) == BashToolArguments(
        command="ls", tail=5
    )
    assert sent.meta is not None and sent.meta.progress_token == "t"
