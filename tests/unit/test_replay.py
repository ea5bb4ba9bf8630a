"""The log of notifications a resume replays from: every cut point, with and
without a full log."""

from __future__ import annotations

import msgspec

from bashrpc.server.output.replay import ChunkLog


class Text(msgspec.Struct, frozen=True):
    text: str


def size(text: str) -> int:
    """What one notification of `text` holds: its params as JSON, in UTF-8 bytes."""
    return len(msgspec.json.encode(Text(text)))


def add(log: ChunkLog, text: str) -> None:
    log.add("text", Text(text))


def texts_of(log: ChunkLog, seen: int) -> list[str]:
    texts = []
    for chunk in log.after(seen).chunks:
        assert isinstance(chunk.params, Text)
        texts.append(chunk.params.text)
    return texts


def _log(texts: list[str], max_bytes: int) -> ChunkLog:
    log = ChunkLog(max_bytes)
    for text in texts:
        add(log, text)
    return log


def test_a_resume_from_any_seq_kept_is_exact() -> None:
    texts = [f"line {n}\n" for n in range(10)]
    log = _log(texts, max_bytes=10_000)
    for seen in range(-1, len(texts)):
        replay = log.after(seen)
        assert replay.missed == 0
        assert [c.seq for c in replay.chunks] == list(range(seen + 1, len(texts)))
        assert texts[: seen + 1] + texts_of(log, seen) == texts
        assert {c.method for c in replay.chunks} <= {"text"}


def test_a_full_log_drops_its_oldest_and_says_how_many_a_resume_missed() -> None:
    texts = ["abcd"] * 10
    log = _log(texts, max_bytes=3 * size("abcd"))
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
    log = ChunkLog(size("ab") + 1)
    add(log, "ab")
    add(log, "x" * 100)
    assert [c.seq for c in log.after(-1).chunks] == [1]
    assert log.after(-1).missed == 1


def test_an_empty_log_replays_nothing() -> None:
    log = ChunkLog(10)
    assert log.after(-1).chunks == []
    assert log.after(-1).missed == 0
    assert log.after(5).chunks == []
    assert log.after(5).missed == 0


def test_sizes_are_utf8_bytes() -> None:
    assert size("éé") == size("") + 4
    log = ChunkLog(2 * size("éé"))
    add(log, "éé")
    add(log, "éé")
    assert [c.seq for c in log.after(-1).chunks] == [0, 1]
    add(log, "é")
    assert [c.seq for c in log.after(-1).chunks] == [1, 2]


def test_a_log_that_grows_keeps_what_it_still_had() -> None:
    log = _log(["abcd"] * 4, max_bytes=2 * size("abcd"))
    assert log.first_kept == 2
    log.max_bytes = 100 * size("abcd")
    for _ in range(4, 10):
        add(log, "abcd")
    assert log.first_kept == 2
    assert log.after(0).missed == 1
