"""A job's output ring: offsets, what is kept, gaps, character boundaries."""

from __future__ import annotations

from bashrpc.server.output.ring import OutputRing


def test_offsets_count_every_byte_and_reads_after_a_cursor_are_new_only() -> None:
    ring = OutputRing(100)
    ring.add(b"hello ")
    first = ring.after(0)
    assert (first.data, first.start, first.end, first.missed_from) == (b"hello ", 0, 6, None)
    ring.add(b"world")
    second = ring.after(first.end)
    assert (second.data, second.start, second.end) == (b"world", 6, 11)
    assert ring.after(second.end).data == b""
    # A cursor from the future gets nothing, and the real end.
    assert ring.after(500).end == 11


def test_a_cursor_before_what_is_kept_gets_the_gap_named() -> None:
    ring = OutputRing(10)
    for _ in range(10):
        ring.add(b"0123456789")
    assert ring.total == 100
    assert ring.kept_from == 90
    piece = ring.after(5)
    assert (piece.missed_from, piece.start, piece.data) == (5, 90, b"0123456789")


def test_memory_stays_bounded() -> None:
    ring = OutputRing(1000)
    for _ in range(10000):
        ring.add(b"x" * 100)
    assert len(ring.newest(None).data) == 1000
    assert ring.total == 1_000_000


def test_newest_obeys_a_limit_and_cuts_on_a_character_boundary() -> None:
    ring = OutputRing(100)
    ring.add("aé€z".encode())  # 1 + 2 + 3 + 1 bytes
    piece = ring.newest(5)
    # Five bytes back is inside "é": the cut moves forward to "€".
    assert piece.data == "€z".encode()
    assert piece.start == 3
    assert ring.newest(None).data == "aé€z".encode()
