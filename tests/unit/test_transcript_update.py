"""What `replay --update` writes: only the requests that differ are rewritten."""

from __future__ import annotations

from bashrpc.protocol.normalization import normalize
from bashrpc.protocol.transcript import Record, ServerRecord
from bashrpc.protocol.transcriptupdate import updated
from tests.unit.test_transcript_normalization import chunk, note, result, sent


def session(one: list[Record], two: list[Record]) -> list[Record]:
    return [sent(1, "bash", command="a"), *one, sent(2, "bash", command="b"), *two]


def test_a_request_that_differs_takes_this_runs_lines_and_the_rest_stays() -> None:
    expected = session(
        [chunk(1, 0, "o"), chunk(1, 1, "ne\n"), result(1, {"exitCode": 0})],
        [chunk(2, 0, "two\n"), result(2, {"exitCode": 7})],
    )
    actual = session(
        [chunk(1, 0, "one\n"), result(1, {"exitCode": 0})],
        [chunk(2, 0, "tw"), chunk(2, 1, "o\n"), result(2, {"exitCode": 0})],
    )
    written = updated(expected, actual, [])
    assert written == [*expected[:4], actual[3], chunk(2, 0, "tw"), chunk(2, 1, "o\n"), actual[-1]]
    assert normalize(written) == normalize(actual)


def test_what_differs_about_no_request_rewrites_the_whole_run() -> None:
    expected = session([result(1, {})], [result(2, {})])
    actual = session([note("server/draining", seconds=1), result(1, {})], [result(2, {})])
    assert updated(expected, actual, []) == actual


def test_a_batch_of_replies_to_requests_that_differ_and_match_rewrites_the_whole_run() -> None:
    batch = ServerRecord(
        message=[
            {"jsonrpc": "2.0", "id": 1, "result": {"exitCode": 0}},
            {"jsonrpc": "2.0", "id": 2, "result": {"exitCode": 1}},
        ]
    )
    asked: list[Record] = [sent(1, "bash", command="a"), sent(2, "bash", command="b", waited=False)]
    expected = [*asked, batch]
    actual = [*asked, result(1, {"exitCode": 0}), result(2, {"exitCode": 0})]
    assert updated(expected, actual, []) == actual
