import hashlib

import pytest

from bashrpc.server.output.sanitize import Sanitizer
from bashrpc.server.output.sink import OutputSink, count_lines
from tests.carriagereturns import CASES


class MemorySpill:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False
        self.cut = False

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> int | None:
        self.closed = True
        return 1


@pytest.mark.parametrize(
    ("text", "lines"), [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)]
)
def test_count_lines(text: str, lines: int) -> None:
    assert count_lines(text) == lines
    assert count_lines(text.encode()) == lines


def test_small_output_is_kept_whole() -> None:
    sink = OutputSink(max_bytes=100)
    sink.feed(b"1\n2\n3")
    sink.finish()
    s = sink.summary()
    assert (s.text, s.truncated, s.total_lines, s.output_lines, s.total_bytes) == (
        "1\n2\n3",
        False,
        3,
        3,
        5,
    )


def test_tail_is_bounded_and_spill_gets_everything() -> None:
    spill = MemorySpill()
    sink = OutputSink(max_bytes=1000, open_spill=lambda: spill)
    expected = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    for i in range(0, len(expected), 777):
        sink.feed(expected[i : i + 777])
        assert len(sink._tail) <= 2 * 1000 + 777
    sink.finish()
    s = sink.summary()
    assert s.truncated
    assert s.total_lines == 20000 and s.total_bytes == len(expected)
    assert s.output_bytes <= 1000
    assert expected.endswith(s.text.encode())
    assert hashlib.sha256(spill.data).digest() == hashlib.sha256(expected).digest()


def test_tail_cut_falls_on_a_character_boundary() -> None:
    sink = OutputSink(max_bytes=1024)
    sink.feed(("€" * 2000).encode())
    s = sink.summary()
    assert s.text == "€" * (s.output_bytes // 3)
    assert s.output_bytes <= 1024


def test_no_spill_when_output_fits() -> None:
    opened: list[int] = []

    def open_spill() -> None:
        opened.append(1)

    sink = OutputSink(max_bytes=10, open_spill=open_spill)
    sink.feed(b"012345678\n")
    assert not sink.truncated and opened == []
    sink.feed(b"!\n")
    assert sink.truncated and opened == [1]


def test_spill_failure_still_truncates() -> None:
    sink = OutputSink(max_bytes=10, open_spill=lambda: None)
    sink.feed(b"x" * 100)
    sink.finish()
    s = sink.summary()
    assert s.truncated and s.output_bytes == 10 and sink.spill is None


@pytest.mark.parametrize(("data", "expected"), CASES)
def test_carriage_returns_fold_in_what_is_kept_not_in_what_streams(
    data: bytes, expected: str
) -> None:
    spill = MemorySpill()
    sanitizer = Sanitizer()
    as_it_came = sanitizer.feed(data) + sanitizer.finish()
    for cut in range(len(data) + 1):
        sink = OutputSink(max_bytes=10_000, open_spill=lambda: spill)
        streamed = sink.feed(data[:cut]) + sink.feed(data[cut:]) + sink.finish()
        assert sink.summary().text == expected, cut
        # Streamed at once, as it came, CRs included.
        assert streamed == as_it_came, cut


def test_a_line_being_redrawn_streams_at_once() -> None:
    sink = OutputSink(max_bytes=100)
    assert sink.feed(b"downloading") == b"downloading"
    assert sink.tail_text() == "downloading"
    assert sink.feed(b"\rdone\n") == b"\rdone\n"
    sink.finish()
    assert sink.summary().text == "done\n" and sink.summary().total_lines == 1


LINES_OF_EVERY_KIND = (
    b"plain\n"
    b"\x1b[31mred\x1b[0m\n"
    b"title\x1b]0;set\x07\n"
    b"osc cut by a line feed \x1b]0;never ended\n"
    b"caf\xc3\xa9 \xff invalid\n"
    b"tab\there\x01\x7f\n"
    b"10%\r50%\r100%\r\n"
    b"redrawn\rover\n"
    b"no newline at the end"
)


def test_total_lines_count_every_line_kept_whatever_the_path_and_the_reads() -> None:
    for cut in range(len(LINES_OF_EVERY_KIND) + 1):
        sink = OutputSink(max_bytes=10_000)
        sink.feed(LINES_OF_EVERY_KIND[:cut])
        sink.feed(LINES_OF_EVERY_KIND[cut:])
        sink.finish()
        summary = sink.summary()
        assert summary.total_lines == count_lines(summary.text) == 9, cut


def test_total_lines_of_a_truncated_stream_count_what_went_past() -> None:
    sink = OutputSink(max_bytes=1000)
    line = b"x" * 99 + b"\n"
    for _ in range(3000):
        sink.feed(line * 7 + b"\x1b[1mbold\x1b[0m\n" + "é\n".encode())
    sink.finish()
    assert sink.summary().total_lines == 3000 * 9
