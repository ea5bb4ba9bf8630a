import pytest

from bashrpc.protocol import messages
from bashrpc.server.errors import InvalidArgument
from bashrpc.server.output.crfold import CarriageReturnFolder
from bashrpc.server.runtime.pty.screen import TerminalScreen
from bashrpc.server.runtime.seam.backend import Snapshot
from bashrpc.server.services.keys import encode_keys, key_bytes


def fold(parts: list[bytes]) -> bytes:
    folder = CarriageReturnFolder()
    return b"".join(folder.feed(p) for p in parts) + folder.finish()


def test_crlf_is_a_line_break() -> None:
    assert fold([b"a\r\nb\r\n"]) == b"a\nb\n"


def test_progress_bar_keeps_its_final_state() -> None:
    bar = b"".join(b"\rprogress %d%%" % i for i in range(10000)) + b"\r\ndone\r\n"
    assert fold([bar]) == b"progress 9999%\ndone\n"


def test_split_crlf_and_redraw_across_feeds() -> None:
    assert fold([b"a\r", b"\nb"]) == b"a\nb"
    assert fold([b"old\r", b"new\n"]) == b"new\n"
    assert fold([b"x\r", b"\r", b"\n"]) == b"x\n"


def test_trailing_cr_keeps_the_line() -> None:
    assert fold([b"50%\r"]) == b"50%"


def test_long_line_is_flushed_unfolded() -> None:
    folder = CarriageReturnFolder(max_line_bytes=10)
    out = folder.feed(b"0123456789ABC")
    assert out == b"0123456789" and folder.pending() == b"ABC"


def test_pending_is_the_current_line() -> None:
    folder = CarriageReturnFolder()
    assert folder.feed(b"done\nworking 1\rworking 2") == b"done\n"
    assert folder.pending() == b"working 2"


@pytest.mark.parametrize(
    ("key", "normal", "app"),
    [
        ("up", b"\x1b[A", b"\x1bOA"),
        ("left", b"\x1b[D", b"\x1bOD"),
        ("home", b"\x1b[H", b"\x1bOH"),
        ("end", b"\x1b[F", b"\x1bOF"),
        ("enter", b"\r", b"\r"),
        ("pagedown", b"\x1b[6~", b"\x1b[6~"),
        ("f1", b"\x1bOP", b"\x1bOP"),
        ("f12", b"\x1b[24~", b"\x1b[24~"),
        ("ctrl+c", b"\x03", b"\x03"),
        ("CTRL+D", b"\x04", b"\x04"),
        ("alt+x", b"\x1bx", b"\x1bx"),
        ("backspace", b"\x7f", b"\x7f"),
        ("delete", b"\x1b[3~", b"\x1b[3~"),
    ],
)
def test_keys(key: str, normal: bytes, app: bytes) -> None:
    assert key_bytes(key, app_cursor=False) == normal
    assert key_bytes(key, app_cursor=True) == app


def test_unknown_key_names_its_index() -> None:
    with pytest.raises(InvalidArgument) as info:
        encode_keys(["enter", "hyper+q"], app_cursor=False)
    assert info.value.detail == messages.UNKNOWN_KEY.format(key="hyper+q", index=1)


def snapshot(screen: TerminalScreen) -> Snapshot:
    """Render here and now (the server renders on a worker thread)."""
    return screen.take()()


def test_screen_renders_and_tracks_cursor_mode() -> None:
    screen = TerminalScreen(20, 5)
    screen.feed(b"a\r\nb\r\n")
    snap = snapshot(screen)
    assert snap.lines[:3] == ["a", "b", ""] and (snap.cursor_x, snap.cursor_y) == (0, 2)
    assert not screen.app_cursor
    screen.feed(b"\x1b[?1h\x1b[2J\x1b[Hhi")
    assert screen.app_cursor
    snap = snapshot(screen)
    assert snap.lines == ["hi", "", "", "", ""] and (snap.cursor_x, snap.cursor_y) == (2, 0)
    screen.feed(b"\x1b[?1l")
    assert not screen.app_cursor
    screen.resize(40, 10)
    assert (snapshot(screen).cols, snapshot(screen).rows) == (40, 10)


def test_a_private_rendition_sequence_is_dropped_not_fatal() -> None:
    # vim asks for xterm's modifyOtherKeys mode (CSI ? 4 m); pyte used to raise on it.
    screen = TerminalScreen(20, 3)
    screen.feed(b"\x1b[>4;2m\x1b[?4m\x1b[1mvim\x1b[m")
    assert snapshot(screen).lines[0] == "vim"


def test_cursor_mode_sequence_split_across_reads() -> None:
    screen = TerminalScreen(20, 5)
    screen.feed(b"hello \x1b[?")
    screen.feed(b"1h world")
    assert screen.app_cursor
    screen.feed(b"\x1b[?25;1")
    screen.feed(b"l")
    assert not screen.app_cursor


def test_a_flood_renders_from_the_newest_output() -> None:
    screen = TerminalScreen(20, 3)
    for i in range(200_000):
        screen.feed(b"line %d\r\n" % i)
    snap = snapshot(screen)
    assert snap.lines == ["line 199998", "line 199999", ""]
    screen.feed(b"\x1b[2J\x1b[Hafter")
    assert snapshot(screen).lines == ["after", "", ""]


def test_fast_and_slow_paths_agree() -> None:
    cases = [
        [b"a\r\nb\r\nc"],
        [b"a\r\nb", b"\r\nc\r\n"],
        [b"x\r\n", b"y\ry2\r\n", b"z\r\n"],
        [b"no newline at all"],
        [b"one\r", b"\r\ntwo\r\n"],
    ]
    for parts in cases:
        slow = CarriageReturnFolder()
        expected = b""
        for part in parts:
            for byte in part:  # one byte at a time never takes the fast path for CRs
                expected += slow.feed(bytes([byte]))
        expected += slow.finish()
        assert fold(parts) == expected, parts
