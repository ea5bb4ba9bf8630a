"""The chunk log a resume replays from: every cut point, with and without a full log."""

from __future__ import annotations

from bashrpc.server.output.replay import ChunkLog


def _log(texts: list[str], max_bytes: int) -> ChunkLog:
    log = ChunkLog(max_bytes)
    for seq, text in enumerate(texts):
        log.add(seq, text, 0)
    return log


def test_a_resume_from_any_seq_kept_is_exact() -> None:
    texts = [f"line {n}\n" for n in range(10)]
    log = _log(texts, max_bytes=10_000)
    for seen in range(-1, len(texts)):
        replay = log.after(seen)
        assert replay.missed == 0
        assert [c.seq for c in replay.chunks] == list(range(seen + 1, len(texts)))
        assert texts[: seen + 1] + [c.text for c in replay.chunks] == texts


def test_a_full_log_drops_its_oldest_and_says_how_many_a_resume_missed() -> None:
    texts = ["abcd"] * 10
    log = _log(texts, max_bytes=12)
    assert log.first_kept == 7
    assert log.next_seq == 10
    for seen in range(-1, len(texts)):
        replay = log.after(seen)
        kept = list(range(max(seen + 1, 7), 10))
        assert [c.seq for c in replay.chunks] == kept
        assert replay.missed == max(0, 7 - seen - 1)
        # No chunk twice, none lost unsaid.
        assert seen + 1 + replay.missed + len(kept) == 10


def test_the_newest_chunk_is_kept_however_large() -> None:
    log = ChunkLog(4)
    log.add(0, "ab", 0)
    log.add(1, "x" * 100, 0)
    assert [c.seq for c in log.after(-1).chunks] == [1]
    assert log.after(-1).missed == 1


def test_an_empty_log_replays_nothing() -> None:
    log = ChunkLog(10)
    assert log.after(-1).chunks == []
    assert log.after(-1).missed == 0
    assert log.after(5).chunks == []
    assert log.after(5).missed == 0


def test_sizes_are_utf8_bytes() -> None:
    log = ChunkLog(8)
    log.add(0, "éé", 0)
    log.add(1, "éé", 0)
    assert [c.seq for c in log.after(-1).chunks] == [0, 1]
    log.add(2, "é", 0)
    assert [c.seq for c in log.after(-1).chunks] == [1, 2]


def test_a_log_that_grows_keeps_what_it_still_had() -> None:
    log = _log(["abcd"] * 4, max_bytes=8)
    assert log.first_kept == 2
    log.max_bytes = 100
    for seq in range(4, 10):
        log.add(seq, "abcd", 0)
    assert log.first_kept == 2
    assert log.after(0).missed == 1
