"""The carriage-return fold is a state machine across feeds: where reads split
never matters, and a line that never ends never grows past its bound."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashrpc.server.output.crfold import CarriageReturnFolder
from bashrpc.server.output.sink import OutputSink
from tests.carriagereturns import CASES


def fold(parts: list[bytes], max_line_bytes: int = 64 * 1024) -> bytes:
    folder = CarriageReturnFolder(max_line_bytes)
    return b"".join(folder.feed(p) for p in parts) + folder.finish()


def text_of(parts: list[bytes]) -> str:
    """The text result of a command on pipes: the sink sanitizes, then folds."""
    sink = OutputSink()
    for part in parts:
        sink.feed(part)
    sink.finish()
    return sink.summary().text


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_the_shared_cases_at_every_split_point(data: bytes, expected: str) -> None:
    assert text_of([data]) == expected
    for cut in range(len(data) + 1):
        assert text_of([data[:cut], data[cut:]]) == expected, cut
    assert text_of([bytes([byte]) for byte in data]) == expected


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


fragments = st.one_of(
    st.sampled_from([b"\r", b"\n", b"\r\n", b"\r\r", b"abc", b"0123456789", b"\xe2\x82\xac"]),
    st.binary(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(fragments, max_size=30),
    st.lists(st.integers(min_value=0), max_size=8),
    st.integers(min_value=1, max_value=16),
)
def test_output_never_depends_on_where_reads_split(
    chunks: list[bytes], cuts: list[int], max_line_bytes: int
) -> None:
    data = b"".join(chunks)
    whole = fold([data], max_line_bytes)
    assert fold(split_at(data, cuts), max_line_bytes) == whole
    assert fold([bytes([b]) for b in data], max_line_bytes) == whole
    assert b"\r" not in whole


def test_a_line_that_never_ends_stays_bounded() -> None:
    folder = CarriageReturnFolder(max_line_bytes=1000)
    out = bytearray()
    for i in range(2000):
        out += folder.feed(b"x" * 333 + (b"\r" if i % 7 == 0 else b""))
        assert len(folder.pending()) <= 1000
    out += folder.finish()
    # What passed the bound was passed on as it stood; the rest folded.
    assert set(out) == {ord("x")} and len(out) < 2000 * 333


def test_a_long_line_is_passed_on_in_pieces_of_the_bound() -> None:
    assert fold([b"0123456789ABC\rxy\n"], max_line_bytes=5) == b"0123456789xy\n"
    assert fold([b"01234", b"56789ABC", b"\rxy\n"], max_line_bytes=5) == b"0123456789xy\n"
