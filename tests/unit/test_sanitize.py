"""The sanitizer is a state machine across feeds: where reads split never matters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bashrpc.server.output.sanitize import Sanitizer

ESC = "\x1b"
# CR is kept: the sink folds the line it redraws.
CONTROLS = {chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"} | {
    chr(c) for c in range(0x7F, 0xA0)
}


def sanitize(parts: list[bytes]) -> str:
    """The output, its bytes that are not UTF-8 as lone surrogates (exact)."""
    s = Sanitizer()
    return (b"".join(s.feed(p) for p in parts) + s.finish()).decode("utf-8", "surrogateescape")


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


# -- well-formed streams: text tokens survive, sequences vanish ----------------

plain_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters=list(CONTROLS)),
    max_size=20,
)
params = st.text(alphabet="0123456789;:?<=>", max_size=8)
string_body = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300
) | st.integers(min_value=4000, max_value=9000).map(lambda n: "t" * n)
sequences = st.one_of(
    st.builds(lambda p, f: f"{ESC}[{p}{f}", params, st.sampled_from("mHJKABCDhlsu")),
    st.builds(lambda p, f: f"\x9b{p}{f}", params, st.sampled_from("mHJK")),
    st.builds(lambda b, t: f"{ESC}]{b}{t}", string_body, st.sampled_from(["\x07", ESC + "\\"])),
    st.builds(lambda b: f"\x9d{b}\x9c", string_body),
    st.builds(lambda k, b: f"{ESC}{k}{b}{ESC}\\", st.sampled_from("PX^_"), string_body),
    st.sampled_from([f"{ESC}(B", f"{ESC}=", f"{ESC}>", f"{ESC}7", f"{ESC}8", f"{ESC}#8"]),
)
well_formed = st.lists(st.tuples(st.booleans(), plain_text, sequences), max_size=12)


@settings(max_examples=300, deadline=None)
@given(well_formed, st.lists(st.integers(min_value=0), max_size=6))
def test_well_formed_streams_keep_exactly_their_text(
    tokens: list[tuple[bool, str, str]], cuts: list[int]
) -> None:
    data = "".join(text + (seq if with_seq else "") for with_seq, text, seq in tokens)
    expected = "".join(text for _, text, _ in tokens)
    assert sanitize(split_at(data.encode(), cuts)) == expected


# -- anything at all: every split gives the same output --------------------------

fragments = st.one_of(
    st.binary(max_size=8),
    st.sampled_from(
        [
            b"\x1b",
            b"\x1b[",
            b"\x1b]",
            b"\x1bP",
            b"\x1b_",
            b"\x1b\\",
            b"\x07",
            b"\x9b",
            b"\xc2\x9b",
            b"\xc2\x9d",
            b"\xc2\x9c",
            b"\xe2\x82\xac",
            b"\xf0\x9d\x84\x9e",
            b"\r\n",
            b"\n",
            b"\x18",
            b"\x1a",
            b"31m",
            b"0;title",
        ]
    ),
    st.text(max_size=6).map(str.encode),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(fragments, max_size=30), st.lists(st.integers(min_value=0), max_size=8))
def test_output_never_depends_on_where_reads_split(chunks: list[bytes], cuts: list[int]) -> None:
    data = b"".join(chunks)
    whole = sanitize([data])
    assert sanitize(split_at(data, cuts)) == whole
    assert sanitize([bytes([b]) for b in data]) == whole
    assert not CONTROLS & set(whole)


@pytest.mark.parametrize(
    "data",
    [
        b"\xc2\x00\x80",  # a NUL dropped between an invalid lead byte and its tail
        b"\xc2\x1b[31m\x9b31mred",  # an escape sequence dropped: an 8-bit CSI
        b"\xc2\x07\x07\x9d0;title\x9c",  # two controls, then an 8-bit OSC
        b"\xc2\x00\x80\x80\x85",  # a run of them after the lead byte
    ],
)
def test_what_is_dropped_never_joins_bytes_into_a_c1_control(data: bytes) -> None:
    """Bytes that are not UTF-8 pass through as they came; with a control dropped
    between them, a lone 0xC2 and a byte 0x80-0x9F would meet, and read as one
    C1 control (an 8-bit CSI among them). Whatever the split."""
    whole = sanitize([data])
    assert not CONTROLS & set(whole)
    assert sanitize([bytes([b]) for b in data]) == whole
    for cut in range(len(data) + 1):
        assert sanitize([data[:cut], data[cut:]]) == whole
    assert whole.startswith("\udcc2")


def test_an_8bit_csi_cut_between_its_bytes() -> None:
    assert sanitize([b"\xc2", b"\x9b31mred\n"]) == "red\n"
    assert sanitize([b"\xc2\x9b", b"31mred\n"]) == "red\n"


def test_a_long_title_cut_anywhere() -> None:
    data = b"\x1b]0;" + b"t" * 5000 + b"\x07after\n"
    for cut in (3, 100, 4096, 4100, 5003):
        assert sanitize([data[:cut], data[cut:]]) == "after\n", cut


def test_inline_images_are_swallowed_whole() -> None:
    payload = b"QUJD" * 250_000  # 1 MB of base64
    iterm = b"before\n\x1b]1337;File=inline=1:" + payload + b"\x07after\n"
    kitty = b"\x1b_Gf=100,m=1;" + payload[:4096] + b"\x1b\\" + b"\x1b_Gm=0;AAAA\x1b\\after\n"
    assert sanitize([iterm[i : i + 65536] for i in range(0, len(iterm), 65536)]) == (
        "before\nafter\n"
    )
    assert sanitize([kitty]) == "after\n"


def test_a_stray_string_opener_ends_at_the_line() -> None:
    # An unterminated OSC must not swallow the rest of a command's output.
    assert sanitize([b"\x1b]oops\nline two\n"]) == "\nline two\n"


def test_cancel_and_substitute_abort_a_sequence() -> None:
    assert sanitize([b"\x1b[12\x18x\x1b]ab\x1ay"]) == "xy"


def test_printable_ascii_is_returned_as_is() -> None:
    data = b"no copies here\n"
    assert Sanitizer().feed(data) is data


def test_plain_text_passes_untouched() -> None:
    assert sanitize([b"hello\tworld\n"]) == "hello\tworld\n"


def test_multibyte_character_split_across_reads_survives() -> None:
    data = "héllo €𝄞".encode()
    for cut in range(1, len(data)):
        assert sanitize([data[:cut], data[cut:]]) == "héllo €𝄞"


def test_bytes_that_are_not_utf8_pass_through_exact() -> None:
    s = Sanitizer()
    assert s.feed(b"a\xffb\xc3") + s.finish() == b"a\xffb\xc3"
    s = Sanitizer()
    # Stripping the sequence between them would make a C1 control (NEL) of two
    # stray bytes, as anything that reads the output as UTF-8 reads it: the
    # byte after the lone 0xC2 goes too. Stray bytes elsewhere stay exact.
    assert s.feed(b"\xc2\x1b[m\x85 \x80\x1b[0m") + s.finish() == b"\xc2 \x80"


def test_ansi_sequences_and_controls_are_removed() -> None:
    raw = b"\x1b[31mred\x1b[0m \x1b]0;title\x07ok\r\n\x00nul\x7fdel\x08\x1b(B!"
    assert sanitize([raw]) == "red ok\r\nnuldel!"


def test_c1_controls_are_removed_and_c1_introducers_honoured() -> None:
    assert sanitize(["a\u0085b\u0086c".encode()]) == "abc"
    # U+0090 is DCS, U+009C is ST: the string between them is a sequence.
    assert sanitize(["a\u0090hidden\u009cb".encode()]) == "ab"


def test_escape_split_across_reads_is_still_stripped() -> None:
    raw = b"x\x1b[38;5;196my\x1b]8;;http://e.com\x1b\\z"
    for cut in range(1, len(raw)):
        assert sanitize([raw[:cut], raw[cut:]]) == "xyz", cut


def test_an_unfinished_sequence_at_the_end_is_dropped() -> None:
    assert sanitize([b"ok\x1b[12"]) == "ok"
    assert sanitize([b"ok\x1b"]) == "ok"
