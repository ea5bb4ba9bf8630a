"""Incremental text sanitizing for command output, sans-I/O.

Output arrives in arbitrary slices, so a UTF-8 character or an escape sequence
may be cut anywhere. The sanitizer is therefore a state machine over decoded
characters, in the manner of a terminal's parser: whatever state a read ends
in carries over to the next, and the output is the same for every split of
the same bytes. Nothing of a sequence is buffered, so a megabyte-long inline
image costs no memory.

What comes out is printable text: TAB, LF and CR survive (CR is left to the
sink, which folds the line it redraws); escape sequences (CSI, OSC, DCS, SOS,
PM, APC, in their 7-bit and 8-bit forms) and every other control character
(C0, DEL, C1) are removed. Bytes that are not UTF-8 pass through as they
came (decoded with surrogateescape, encoded back the same way), so an artifact
keeps them exact; where the output becomes JSON text they become U+FFFD. Once
something between them is dropped, two such bytes may meet: a lone 0xC2 and a
byte 0x80-0x9F would read as one C1 control, so such a byte after a lone 0xC2
is dropped too (in one read or across two).
A string sequence (OSC and the like) ends at its terminator (ST or BEL), at
CAN or SUB, at a new ESC that does not begin ST, or at LF: a terminal would
swallow everything after a stray `ESC ]`, but a model reading the output
should lose at most the rest of that line.
"""

from __future__ import annotations

import codecs
import enum
import re

ESC = "\x1b"
LF = "\n"
CSI_8BIT = "\x9b"
# Characters that end or abort a string sequence wherever they appear.
_STRING_ENDS = re.compile("[\x07\x0a\x18\x1a\x1b\x9c]")
# Anything the ground state does not pass through as text.
_SPECIAL = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
# CSI parameter and intermediate bytes; the final byte is 0x40-0x7e.
_CSI_BODY = re.compile("[\x20-\x3f]*")
# Introducers of string sequences: ESC P/X/^/_/] and their 8-bit forms.
_STRING_OPENERS_7BIT = frozenset("PX^_]")
_STRING_OPENERS_8BIT = frozenset("\x90\x98\x9d\x9e\x9f")
# A complete sequence, as the state machine would read it from the ground
# state back to the ground state: CSI, a string sequence with its terminator,
# or a short escape. Taking one whole changes no output; it only saves
# stepping through common sequences one character at a time.
_COMPLETE_SEQUENCE = (
    "(?:\x1b\\[|\x9b)[\x20-\x3f]*[\x40-\x7e]"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x0a\x18\x1a\x1b\x9c]*"
    "(?:[\x07\x18\x1a\x9c]|\x1b\\\\)"
    "|\x1b(?:[\x20-\x2f]+[\x30-\x7e]|[\x30-\x4f\x51-\x57\x59\x5a\x5c\x60-\x7e])"
)
# Controls the ground state drops and stays in: every special character but ESC
# and the 8-bit introducers of CSI and string sequences.
_PLAIN_CONTROLS = "[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x8f\x91-\x97\x99\x9a\x9c]"
# The same C0 controls and DEL in UTF-8: single bytes that are never part of
# another character. Dropping them from the encoded text is one bytes.translate,
# where a str regex took a step per match (binary output has one every few
# characters). C1 controls are rare as characters, and are dropped as such.
_PLAIN_C0_BYTES = bytes(c for c in range(0x80) if re.fullmatch(_PLAIN_CONTROLS, chr(c)))
_PLAIN_C1 = re.compile("[\x80-\x8f\x91-\x97\x99\x9a\x9c]")
# From the ground state: the next character that may leave it. Plain controls
# are dropped from all ground text in one pass at the end, so binary output costs
# a step per ESC, not per control byte.
_GROUND_STOP = re.compile("[\x1b\x90\x98\x9b\x9d\x9e\x9f]")
_COMPLETE = re.compile(_COMPLETE_SEQUENCE)
_HAS_SPECIAL = re.compile(_SPECIAL)
# The same complete sequences, or a control that leaves the ground state as it
# is. When removing all of them leaves no ESC and no 8-bit introducer, one
# substitution did exactly what the state machine would have done.
_DROP = re.compile(_COMPLETE_SEQUENCE + "|" + _PLAIN_CONTROLS)
# Characters per ESC below which the one-substitution pass is not tried.
_ESCAPES_FOR_MACHINE = 1024
_LEFTOVER = re.compile("[\x1b\x90\x98\x9b\x9d\x9e\x9f]")
# Printable ASCII but LF: what the fast path deletes, leaving the LFs to be counted.
_PRINTABLE_ASCII_BUT_LF = bytes(range(0x20, 0x7F)) + b"\t\r"
# A lone 0xC2 the output kept, and the bytes 0x80-0x9F that would make it a C1
# control, met where something between them was dropped. 0xC2 followed by one of
# these is never kept otherwise: read together, the decoder took them as one
# character, a C1 control, which is dropped.
_JOINED_C1 = re.compile(b"\xc2[\x80-\x9f]+")
_C1_TAIL_BYTES = bytes(range(0x80, 0xA0))
_UTF8 = codecs.getincrementaldecoder("utf-8")
# Bytes that are not UTF-8 go through as lone surrogates and come out as they came.
_RAW = "surrogateescape"


class _State(enum.Enum):
    GROUND = enum.auto()
    ESCAPE = enum.auto()  # right after ESC
    ESCAPE_INTERMEDIATE = enum.auto()  # after ESC and intermediates (0x20-0x2f)
    CSI = enum.auto()
    STRING = enum.auto()  # inside OSC/DCS/SOS/PM/APC
    STRING_ESCAPE = enum.auto()  # ESC seen inside a string: ST, or a new sequence


def strip_controls(text: str) -> str:
    """Sanitize complete text in one go."""
    sanitizer = Sanitizer()
    return (sanitizer.feed(text.encode()) + sanitizer.finish()).decode("utf-8", "replace")


class Sanitizer:
    """Raw bytes in, sanitized bytes out: UTF-8, but for bytes that were not.

    Bytes, not str, because most output is printable ASCII: then the input
    itself is the output, with no decode, no copy and no re-encode.

    It counts the LFs it passes on (`newlines`): the fast path's one pass over
    the bytes finds them anyway, where a `bytes.count` would be a second pass
    as long as the first.
    """

    def __init__(self) -> None:
        self.newlines = 0
        # Made on the first byte that is not printable ASCII: most commands never need one.
        self._decoder: codecs.IncrementalDecoder | None = None
        self._decoder_empty = True
        self._state = _State.GROUND
        # The output so far ended with a lone 0xC2 (see `_unjoined`).
        self._lone_c2 = False

    def feed(self, data: bytes) -> bytes:
        if self._state is _State.GROUND and self._decoder_empty:
            # Fast path: printable ASCII needs no decoder state and no parsing.
            # What is left once it is deleted is all LFs, or holds something else.
            rest = data.translate(None, _PRINTABLE_ASCII_BUT_LF)
            if not rest.strip(b"\n"):
                self.newlines += len(rest)
                if data:
                    self._lone_c2 = False
                return data
            if data.isascii():
                return self._emitted(self._run(data.decode("ascii")))
        if self._decoder is None:
            self._decoder = _UTF8(_RAW)
        text = self._decoder.decode(data)
        self._decoder_empty = not self._decoder.getstate()[0]
        return self._emitted(self._run(text))

    def finish(self) -> bytes:
        """Flush a cut-off character; an unfinished sequence is dropped."""
        if self._decoder is None:
            return b""
        text = self._decoder.decode(b"", final=True)
        self._decoder_empty = True
        out = self._emitted(self._run(text)) if text else b""
        self._state = _State.GROUND
        return out

    def _emitted(self, out: bytes) -> bytes:
        """What leaves: no two stray bytes joined into a C1 control, its LFs counted."""
        out = self._unjoined(out)
        if b"\n" in out:
            self.newlines += out.count(b"\n")
        return out

    def _unjoined(self, out: bytes) -> bytes:
        """`out` with no lone 0xC2 followed by a byte 0x80-0x9F, within it or
        across the last output's end."""
        if self._lone_c2:
            out = out.lstrip(_C1_TAIL_BYTES)
        if b"\xc2" in out:
            out = _JOINED_C1.sub(b"\xc2", out)
        if out:
            self._lone_c2 = out.endswith(b"\xc2")
        return out

    def _run(self, text: str) -> bytes:
        if self._state is _State.GROUND:
            if _HAS_SPECIAL.search(text) is None:
                return text.encode("utf-8", _RAW)
            # Text with an escape every few hundred characters (binary output, mostly)
            # would leave one for the machine anyway: spare it the wasted pass.
            if text.count(ESC) * _ESCAPES_FOR_MACHINE < len(text):
                cleaned = _DROP.sub("", text)
                if _LEFTOVER.search(cleaned) is None:
                    return cleaned.encode("utf-8", _RAW)
        out: list[str] = []
        i, end = 0, len(text)
        while i < end:
            state = self._state
            if state is _State.GROUND:
                stop = _GROUND_STOP.search(text, i)
                if stop is None:
                    out.append(text[i:])
                    break
                start = stop.start()
                out.append(text[i:start])
                whole = _COMPLETE.match(text, start)
                if whole is not None:
                    i = whole.end()
                else:
                    i = start + 1
                    self._state = _ground_transition(text[start])
            elif state is _State.CSI:
                i = _CSI_BODY.match(text, i).end()  # type: ignore[union-attr]
                if i < end:
                    self._state = _State.GROUND
                    if "\x40" <= text[i] <= "\x7e":
                        i += 1  # the final byte; anything else aborts and is reread
            elif state is _State.STRING:
                match = _STRING_ENDS.search(text, i)
                if match is None:
                    break
                i = match.end()
                char = text[match.start()]
                if char == ESC:
                    self._state = _State.STRING_ESCAPE
                else:
                    self._state = _State.GROUND
                    if char == LF:
                        out.append(LF)
            elif state is _State.STRING_ESCAPE:
                if text[i] == "\\":
                    self._state = _State.GROUND
                    i += 1
                else:
                    self._state = _State.ESCAPE
            else:
                i = self._escape(text, i)
        # Only ground text and LFs were kept: its plain controls go in one pass.
        return _without_plain_controls("".join(out))

    def _escape(self, text: str, i: int) -> int:
        """One character after ESC, or after ESC and intermediates."""
        char = text[i]
        fresh = self._state is _State.ESCAPE
        if fresh and char == "[":
            self._state = _State.CSI
        elif fresh and char in _STRING_OPENERS_7BIT:
            self._state = _State.STRING
        elif "\x20" <= char <= "\x2f":
            self._state = _State.ESCAPE_INTERMEDIATE
        elif "\x30" <= char <= "\x7e":
            self._state = _State.GROUND
        elif char == ESC:
            self._state = _State.ESCAPE  # ESC ESC: start over
        else:
            # A control aborts the sequence and is handled as in the ground state.
            self._state = _State.GROUND
            return i
        return i + 1


def _without_plain_controls(text: str) -> bytes:
    """C1 controls go as characters (an escaped byte that is not UTF-8 is none,
    though its bytes may look like one, `_unjoined` keeps two such from meeting),
    C0 and DEL as bytes in one translate."""
    data = text.encode("utf-8", _RAW)
    # 0xC2 starts a C1 control in UTF-8 (and is rare in text): only then is one looked for.
    if b"\xc2" in data and _PLAIN_C1.search(text) is not None:
        data = _PLAIN_C1.sub("", text).encode("utf-8", _RAW)
    return data.translate(None, _PLAIN_C0_BYTES)


def _ground_transition(char: str) -> _State:
    """The state after a special character met in the ground state (dropped either way)."""
    if char == ESC:
        return _State.ESCAPE
    if char == CSI_8BIT:
        return _State.CSI
    if char in _STRING_OPENERS_8BIT:
        return _State.STRING
    return _State.GROUND
