"""What `bashrpc record` notes about each line, and the arguments of a run."""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.placeholders import Substitution
from bashrpc.protocol.transcript import (
    ClientRecord,
    Header,
    Record,
    ServerRecord,
    dump_line,
    line_record,
    loads,
)
from bashrpc.server.cli.main import split_server_args
from bashrpc.server.cli.record import Recorder
from bashrpc.server.cli.runroot import flag_value, portable_args


def request(ident: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % ident


def reply(ident: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % ident


class Written:
    """A recorder, and the lines it wrote."""

    def __init__(self) -> None:
        self.lines: list[bytes] = [dump_line(Header(normalization=1))]
        self.recorder = Recorder(self.lines.append, Substitution([]))
        self.client = self.recorder.client
        self.server = self.recorder.server

    @property
    def records(self) -> list[Record]:
        return loads(b"".join(self.lines)).records


def waited(recorder: Written) -> list[bool]:
    return [r.waited for r in recorder.records if isinstance(r, ClientRecord)]


def test_a_request_sent_after_every_reply_is_lockstep() -> None:
    recorder = Written()
    recorder.client(request(1))
    recorder.server(reply(1))
    recorder.client(request(2))
    assert waited(recorder) == [True, True]


def test_a_request_sent_behind_an_unanswered_one_is_pipelined() -> None:
    recorder = Written()
    recorder.client(request(1))
    recorder.client(request(2))
    recorder.server(reply(2))
    recorder.client(request(3))
    recorder.server(reply(1))
    recorder.client(request(4))
    recorder.server(reply(3))
    recorder.server(reply(4))
    recorder.client(request(5))
    assert waited(recorder) == [True, False, False, False, True]


def test_notifications_and_batches_count_by_their_requests() -> None:
    recorder = Written()
    recorder.client(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]\n')
    recorder.client(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    recorder.server(b'[{"jsonrpc":"2.0","id":1,"result":{}}]\n')
    recorder.client(b"not json at all\n")
    assert waited(recorder) == [True, False, True]
    assert recorder.records[-1] == ClientRecord(waited=True, line="not json at all")
    assert isinstance(recorder.records[2], ServerRecord)


def test_server_arguments_follow_the_double_dash() -> None:
    assert split_server_args(["record", "--out", "f", "--", "--sandbox", "off"]) == (
        ["record", "--out", "f"],
        ["--sandbox", "off"],
    )
    assert split_server_args(["replay", "a", "b"]) == (["replay", "a", "b"], None)
    assert split_server_args(["exec", "--", "x"]) == (["exec", "--", "x"], None)


def test_a_header_keeps_no_path_of_the_run() -> None:
    args = ["attach", "--socket", "/s", "--workspace=/w", "--cwd", "/c", "--sandbox", "off"]
    assert portable_args([*args, "--artifacts-dir", "/a"]) == ["attach", "--sandbox", "off"]
    assert flag_value(args, "--workspace") == "/w"
    assert flag_value(args, "--socket") == "/s"
    assert flag_value(args, "--config") is None


def test_a_secret_input_is_withheld_from_the_transcript() -> None:
    secret = (
        b'{"jsonrpc":"2.0","id":3,"method":"pty/input",'
        b'"params":{"requestId":1,"data":"pw1","secret":true}}\n'
    )
    record = line_record(secret, client=True)
    assert isinstance(record, ClientRecord)
    assert record.message["params"]["data"] == messages.SECRET_WITHHELD
    written = b'[{"jsonrpc":"2.0","method":"terminal/write","params":{"data":"pw2","secret":true}}]'
    assert b"pw1" not in dump_line(record)
    assert b"pw2" not in dump_line(line_record(written, client=True))
    plain = b'{"jsonrpc":"2.0","id":4,"method":"pty/input","params":{"requestId":1,"data":"ls"}}'
    assert b'"data":"ls"' in dump_line(line_record(plain, client=True))
