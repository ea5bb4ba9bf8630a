"""The published normalization of transcripts (version 1), the placeholders and the diff."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bashrpc.protocol.normalization import (
    BYTES,
    DURATION,
    PID,
    SEQ,
    TIMESTAMP,
    VERSION,
    normalize,
)
from bashrpc.protocol.placeholders import (
    HOME,
    TMP,
    WORKSPACE,
    PathHider,
    Substitution,
    hide_paths,
)
from bashrpc.protocol.transcript import (
    MAX_NESTING,
    ClientRecord,
    Header,
    Record,
    Rule,
    ServerRecord,
    Transcript,
    TranscriptError,
    client_line,
    dumps,
    line_record,
    loads,
)
from bashrpc.protocol.transcriptdiff import differences

PATHS = [("/tmp/run/ws", WORKSPACE), ("/tmp/run/home", HOME), ("/tmp", TMP)]


def sent(ident: Any, method: str, waited: bool = True, **params: Any) -> ClientRecord:
    return ClientRecord(
        waited=waited, message={"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
    )


def result(ident: Any, value: Any) -> ServerRecord:
    return ServerRecord(message={"jsonrpc": "2.0", "id": ident, "result": value})


def note(method: str, **params: Any) -> ServerRecord:
    return ServerRecord(message={"jsonrpc": "2.0", "method": method, "params": params})


def chunk(ident: Any, seq: int, text: str, skipped: int = 0) -> ServerRecord:
    extra = {"skipped": skipped} if skipped else {}
    return note("bash/chunk", requestId=ident, sessionId="default", seq=seq, text=text, **extra)


def bash_run(pieces: list[str], ident: int = 1) -> list[Record]:
    records: list[Record] = [sent(ident, "bash", command="seq")]
    records += [chunk(ident, n, piece) for n, piece in enumerate(pieces)]
    records.append(result(ident, {"output": "".join(pieces), "exitCode": 0}))
    return records


def cuts(text: str) -> st.SearchStrategy[list[str]]:
    """`text` cut into pieces at any points."""
    positions = st.lists(st.integers(0, len(text)), max_size=12).map(sorted)
    return positions.map(
        lambda p: [text[a:b] for a, b in zip([0, *p], [*p, len(text)], strict=True)]
    )


OUTPUT = "line one\nline two, cut anywhere\n/tmp/run/ws/file\n" * 3


@given(cuts(OUTPUT), cuts(OUTPUT))
def test_the_number_and_cut_points_of_chunks_never_matter(a: list[str], b: list[str]) -> None:
    substitution = Substitution(PATHS)
    left = normalize(hide_paths(bash_run(a), substitution))
    right = normalize(hide_paths(bash_run(b), substitution))
    assert left == right
    assert left["requests"]["1"]["output"]["bash/chunk"] == OUTPUT.replace("/tmp/run/ws", WORKSPACE)


@given(cuts("cd /tmp/run/ws && ls /tmp/run/home /tmpfile /tmp"))
def test_a_path_cut_by_a_chunk_boundary_is_still_hidden(pieces: list[str]) -> None:
    hidden = Substitution(PATHS).hide_split(pieces)
    assert len(hidden) == len(pieces)
    assert "".join(hidden) == f"cd {WORKSPACE} && ls {HOME} /tmpfile {TMP}"


TRICKY = "cd /tmp/run/ws && ls /tmp/run/home /tmpfile /tmp/run/wsx /tmp\n/tmp/run/w"


@given(cuts(TRICKY))
def test_the_recorder_hides_each_chunk_as_it_comes_as_the_whole_stream_would(
    pieces: list[str],
) -> None:
    """`PathHider` gives each chunk its final text without the chunks after it,
    and holds a chunk only while a path could run on past its end."""
    substitution = Substitution(PATHS)
    whole = substitution.hide_split(pieces)
    hider = PathHider(substitution)
    out: list[Record] = []
    for n, piece in enumerate(pieces):
        out += hider.add(chunk(1, n, piece))
        seen = "".join(pieces[: n + 1])
        could_go_on = any(p.startswith(seen[-k:]) for p, _ in PATHS for k in range(1, len(p) + 1))
        if not could_go_on:
            assert len(out) == n + 1  # nothing waits for text to come
    out += hider.finish()
    assert [r.message["params"]["text"] for r in out] == whole
    assert "".join(whole) == substitution.hide(TRICKY)


def test_the_recorder_holds_no_more_than_its_limit() -> None:
    substitution = Substitution(PATHS)
    hider = PathHider(substitution, held_limit=100)
    assert hider.add(chunk(1, 0, "x /tm"), size=60) == []  # the path may go on
    assert hider.add(note("bash/chunk", requestId=2, seq=0, text="y"), size=60) != []
    assert hider.add(result(1, {}), size=10) == [result(1, {})]


def test_pty_bytes_are_joined_and_hidden_across_cuts() -> None:
    raw = b"/tmp/run/ws\r\nready\r\n"
    pieces = [raw[:7], raw[7:]]
    records: list[Record] = [sent(1, "bash", command="x", pty=True)]
    records += [
        note("pty/output", requestId=1, seq=n, data=base64.b64encode(p).decode())
        for n, p in enumerate(pieces)
    ]
    records.append(result(1, {"exitCode": 0}))
    entry = normalize(hide_paths(records, Substitution(PATHS)))["requests"]["1"]
    assert entry["output"] == {"pty/output": f"{WORKSPACE}\r\nready\r\n"}


def test_placeholders_go_back_into_what_replay_sends() -> None:
    substitution = Substitution([("/elsewhere/ws", WORKSPACE)])
    assert substitution.show(f"cd {WORKSPACE}/sub") == "cd /elsewhere/ws/sub"


def test_a_skip_notice_keeps_its_byte_count() -> None:
    records: list[Record] = [sent(1, "bash", command="x")]
    records += [chunk(1, 0, "a\n"), chunk(1, 1, "[skipped 300 bytes]\nz\n", skipped=300)]
    records.append(result(1, {"exitCode": 0}))
    entry = normalize(records)["requests"]["1"]
    assert entry["output"]["bash/chunk"] == "a\n[skipped 300 bytes]\nz\n"
    assert entry["skipped"] == 300


def test_pids_durations_and_timestamps_become_placeholders() -> None:
    sessions = {"sessions": [{"sessionId": "default", "pid": 4242, "cwd": "x"}]}
    records: list[Record] = [
        sent(1, "session/list"),
        result(1, {**sessions, "durationMs": 12, "at": "built 2026-12-04T16:01:50Z"}),
    ]
    entry = normalize(records)["requests"]["1"]
    assert entry["result"]["sessions"][0]["pid"] == PID
    assert entry["result"]["durationMs"] == DURATION
    assert entry["result"]["at"] == f"built {TIMESTAMP}"


def test_artifact_ids_are_renumbered_in_order_of_appearance() -> None:
    records: list[Record] = [
        sent(1, "bash", command="seq 1 100000"),
        result(1, {"artifactId": 7, "output": "Full: artifact://7"}),
        sent(2, "artifact/read", id=7),
        result(2, {"id": 7, "text": "1\n"}),
        sent(3, "resources/read", uri="artifact://9"),
        result(3, {"contents": [{"uri": "artifact://9"}]}),
    ]
    requests = normalize(records)["requests"]
    assert requests["1"]["result"] == {"artifactId": 1, "output": "Full: artifact://1"}
    assert requests["2"]["result"]["id"] == 1
    assert requests["3"]["result"]["contents"][0]["uri"] == "artifact://2"


def test_seq_is_checked_for_order_not_value() -> None:
    in_order = normalize([sent(1, "bash"), chunk(1, 5, "a"), chunk(1, 9, "b"), result(1, {})])
    assert "seqOutOfOrder" not in in_order["requests"]["1"]
    backwards = normalize([sent(1, "bash"), chunk(1, 9, "a"), chunk(1, 5, "b"), result(1, {})])
    assert backwards["requests"]["1"]["seqOutOfOrder"] is True


def test_the_servers_version_is_not_compared() -> None:
    info = {"serverInfo": {"name": "bashrpc", "version": "9.9.9"}, "protocolVersion": "x"}
    entry = normalize([sent(1, "initialize"), result(1, info)])["requests"]["1"]
    assert entry["result"]["serverInfo"] == {"name": "bashrpc", "version": VERSION}
    assert entry["result"]["protocolVersion"] == "x"


def test_the_servers_version_in_a_2026_result_meta_is_not_compared() -> None:
    key = "io.modelcontextprotocol/serverInfo"
    said = {"_meta": {key: {"name": "bashrpc", "version": "9.9.9"}}, "tools": []}
    entry = normalize([sent(1, "tools/list"), result(1, said)])["requests"]["1"]
    assert entry["result"]["_meta"][key] == {"name": "bashrpc", "version": VERSION}


def test_a_seq_in_a_reply_is_not_compared() -> None:
    info = {"requestId": 2, "method": "bash", "seq": 3, "state": "finished"}
    listed = {"sessions": [{"sessionId": "s", "requests": [info]}]}
    entry = normalize([sent(1, "session/list"), result(1, listed)])["requests"]["1"]
    assert entry["result"]["sessions"][0]["requests"][0]["seq"] == SEQ


def test_a_notification_after_its_reply_is_counted() -> None:
    late = normalize([sent(1, "bash"), result(1, {}), chunk(1, 0, "late")])
    assert late["requests"]["1"]["lateNotifications"] == 1


def test_lockstep_replies_are_ordered_and_pipelined_ones_a_set() -> None:
    pipelined = [sent(1, "bash"), sent(2, "bash", waited=False)]
    one = normalize([*pipelined, result(1, "a"), result(2, "b")])
    other = normalize([*pipelined, result(2, "b"), result(1, "a")])
    assert differences(one, other) == []
    lockstep = normalize([sent(1, "ping"), result(1, {}), sent(2, "ping"), result(2, {})])
    swapped = {**lockstep, "lockstepOrder": ["2", "1"]}
    assert differences(lockstep, swapped) == [
        'connection: lockstepOrder[0]: expected "1", got "2"',
        'connection: lockstepOrder[1]: expected "2", got "1"',
    ]


def test_snapshots_of_a_tool_call_keep_only_the_last() -> None:
    records: list[Record] = [
        ClientRecord(
            waited=True,
            message={
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "bash", "_meta": {"progressToken": "t"}},
            },
        ),
        note("notifications/progress", progressToken="t", progress=3, message="a"),
        note("notifications/progress", progressToken="t", progress=6, message="b"),
        note("tool/update", requestId=4, content=[{"type": "text", "text": "a\nb\n"}]),
        result(4, {"content": []}),
    ]
    progress = normalize(records)["requests"]["4"]["progress"]
    assert progress["notifications/progress"] == {
        "progressToken": "t",
        "progress": 6,
        "message": "b",
    }
    assert progress["tool/update"]["content"][0]["text"] == "a\nb\n"


def test_sizes_are_not_compared_where_a_path_stands() -> None:
    records: list[Record] = [
        sent(1, "bash"),
        result(1, {"output": f"{WORKSPACE}\n", "outputBytes": 30}),
    ]
    assert normalize(records)["requests"]["1"]["result"]["outputBytes"] == BYTES
    plain: list[Record] = [sent(1, "bash"), result(1, {"output": "x\n", "outputBytes": 2})]
    assert normalize(plain)["requests"]["1"]["result"]["outputBytes"] == 2


def test_custom_rules_apply_at_their_field_and_method_only() -> None:
    records: list[Record] = [sent(1, "bash"), result(1, {"output": "at 16:01", "note": "at 16:01"})]
    rules = [Rule(field="result.output", pattern=r"\d\d:\d\d", replacement="<TIME>")]
    entry = normalize(records, rules)["requests"]["1"]["result"]
    assert entry == {"output": "at <TIME>", "note": "at 16:01"}
    elsewhere = [Rule(field="*", pattern="at", replacement="AT", method="tools/call")]
    assert normalize(records, elsewhere)["requests"]["1"]["result"]["output"] == "at 16:01"


def test_the_diff_names_the_request_and_the_field() -> None:
    want = normalize(bash_run(["a\n"]))
    run: list[Record] = [sent(1, "bash"), chunk(1, 0, "b\n")]
    got = normalize([*run, result(1, {"output": "b\n", "exitCode": 2})])
    found = differences(want, got)
    assert "request 1 (bash): result.exitCode: expected 0, got 2" in found
    assert 'request 1 (bash): result.output: expected "a\\n", got "b\\n"' in found
    assert 'request 1 (bash): output.bash/chunk: expected "a\\n", got "b\\n"' in found


def test_several_lines_differ_as_a_line_diff() -> None:
    want = normalize(bash_run(["same\nold\n"]))
    got = normalize(bash_run(["same\nnew\n"]))
    found = differences(want, got)
    assert "request 1 (bash): output.bash/chunk: the text differs" in found
    assert "    -old" in found and "    +new" in found and "     same" in found


def test_a_missing_reply_and_an_extra_request_are_named() -> None:
    want = normalize(bash_run(["a\n"]))
    got = normalize([sent(1, "bash"), chunk(1, 0, "a\n"), sent(2, "ping", waited=False)])
    found = differences(want, got)
    assert 'request 1 (bash): result: expected {"output": "a\\n", "exitCode": 0}, missing' in found
    assert "request 1 (bash): noReply: unexpected true" in found
    assert "request 2 (ping): not in the transcript" in found


def test_a_transcript_reads_back_as_written() -> None:
    transcript = Transcript(
        header=Header(normalization=1, server_args=["--sandbox", "off"]),
        records=[
            *bash_run(["x\n"]),
            line_record(b"not json\n", client=True),
            line_record(b"\xff\n", client=True),
        ],
    )
    assert loads(dumps(transcript)) == transcript
    assert dumps(transcript).splitlines()[0] == (
        b'{"type":"header","normalization":1,"serverArgs":["--sandbox","off"]}'
    )


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"", "line 1: empty file"),
        (b'{"type":"client","waited":true}\n', "line 1: expected the header"),
        (b'{"type":"header","normalization":1,"format":2}\n', "line 1: format 2"),
        (b'{"type":"header","normalization":1}\n{"type":"nope"}\n', "line 2:"),
        (b'{"type":"header","normalization":1}\n{"type":"header","normalization":1}\n', "line 2"),
    ],
)
def test_a_bad_transcript_names_the_line(data: bytes, where: str) -> None:
    with pytest.raises(TranscriptError, match=where):
        loads(data)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 100_000])
def test_a_line_nested_too_deep_is_recorded_as_its_text(depth: int) -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%s}}\n' % (
        b"[" * depth + b"]" * depth
    )
    record = line_record(line, client=True)
    assert isinstance(record, ClientRecord) and record.message is None
    assert client_line(record, str) == line
    again = loads(dumps(Transcript(header=Header(normalization=1), records=[record])))
    assert again.records == [record]


def test_a_chunks_exact_bytes_hide_the_paths_too() -> None:
    raw = b"/tmp/run/ws/\xff\n"
    exact = base64.b64encode(raw).decode()
    record = note("bash/chunk", requestId=1, seq=0, text="/tmp/run/ws/\ufffd\n", textBase64=exact)
    (hidden,) = hide_paths([record], Substitution(PATHS))
    params = hidden.message["params"]
    assert params["text"] == f"{WORKSPACE}/\ufffd\n"
    assert base64.b64decode(params["textBase64"]) == f"{WORKSPACE}/".encode() + b"\xff\n"
