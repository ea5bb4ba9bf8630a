from bashrpc.protocol.framing import LineFramer, Oversized


def test_splits_on_newline_only_and_keeps_unicode_separators() -> None:
    framer = LineFramer()
    line = '{"a":"x\u2028y\u2029z"}'.encode()
    assert framer.feed(line + b"\n") == [line]


def test_strips_one_trailing_cr_and_skips_blank_lines() -> None:
    framer = LineFramer()
    assert framer.feed(b"one\r\n\n  \r\ntwo\n") == [b"one", b"two"]


def test_reassembles_lines_split_across_feeds() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a"') == []
    assert framer.feed(b":1}\n{") == [b'{"a":1}']
    assert framer.feed(b"}\n") == [b"{}"]


def test_last_line_without_newline_is_delivered_at_close() -> None:
    framer = LineFramer()
    assert framer.feed(b"tail") == []
    assert framer.close() == [b"tail"]
    assert framer.close() == []


def test_oversized_line_is_reported_once_and_never_buffered_whole() -> None:
    framer = LineFramer(max_line_bytes=10)
    frames = []
    for _ in range(100):
        frames += framer.feed(b"x" * 7)
        assert len(framer._buf) <= 10
    frames += framer.feed(b"x\nok\n")
    assert frames == [Oversized(701), b"ok"]


def test_oversized_line_at_eof() -> None:
    framer = LineFramer(max_line_bytes=4)
    assert framer.feed(b"123456") == []
    assert framer.close() == [Oversized(6)]


def test_line_exactly_at_the_limit_is_accepted() -> None:
    framer = LineFramer(max_line_bytes=4)
    assert framer.feed(b"1234\n12345\n") == [b"1234", Oversized(5)]
