"""Incremental text sanitizing for command output, sans-I/O.

Output arrives in arbitrary slices, so UTF-8 characters and escape sequences
may be split between reads; both are held back until complete. What comes out
is printable text: TAB and LF survive, ANSI sequences and every other control
character (C0, CR, DEL, C1, lone surrogates) are removed, and invalid bytes
become U+FFFD.
"""

from __future__ import annotations

import codecs
import re

# A complete escape sequence: CSI, OSC (BEL or ST), string controls, nF/Fp/Fe.
_ANSI = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)
    | \x1b[PX^_][^\x1b]*\x1b\\
    | \x1b[ -/]*[0-~]
    | \x9b[0-?]*[ -/]*[@-~]
    """,
    re.VERBOSE,
)
# The start of a sequence that the next read may complete.
_PARTIAL_ESCAPE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_][^\x1b]*\x1b?|[ -/]*)?"
)
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n"
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# An unterminated sequence longer than this is garbage, not a sequence.
MAX_PENDING_ESCAPE_CHARS = 4096


def strip_controls(text: str) -> str:
    """Sanitize complete text in one go (no state carried between calls)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("", _ANSI.sub("", text))


class Sanitizer:
    """Raw bytes in, sanitized UTF-8 bytes out.

    Bytes, not str, because most output is printable ASCII: then the input
    itself is the output, with no decode, no copy and no re-encode.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        self._decoder_empty = True

    def feed(self, data: bytes) -> bytes:
        if self._decoder_empty and not self._pending:
            # Fast path: printable ASCII needs no decoder state and no regex.
            if not data.translate(None, _PRINTABLE_ASCII):
                return data
            if data.isascii():
                return self._clean(data.decode("ascii"), final=False)
        text = self._decoder.decode(data)
        self._decoder_empty = not self._decoder.getstate()[0]
        if self._pending:
            text = self._pending + text
            self._pending = ""
        if _CONTROL.search(text) is None:
            return text.encode()
        return self._clean(text, final=False)

    def finish(self) -> bytes:
        """Flush what was held back: a cut-off character or escape at the end."""
        text = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        self._decoder_empty = True
        return self._clean(text, final=True) if text else b""

    def _clean(self, text: str, *, final: bool) -> bytes:
        if not final:
            cut = self._partial_escape_start(text)
            if cut is not None:
                self._pending = text[cut:]
                text = text[:cut]
        return _CONTROL.sub("", _ANSI.sub("", text)).encode()

    @staticmethod
    def _partial_escape_start(text: str) -> int | None:
        floor = max(0, len(text) - MAX_PENDING_ESCAPE_CHARS)
        esc = text.rfind("\x1b", floor)
        if esc < 0:
            return None
        if _PARTIAL_ESCAPE.fullmatch(text, esc) is None:
            return None
        if esc == len(text) - 1:
            # A lone ESC may be the first half of an OSC/DCS terminator.
            opener = text.rfind("\x1b", floor, esc)
            if opener >= 0 and _PARTIAL_ESCAPE.fullmatch(text, opener, esc + 1):
                return opener
        return esc
