"""Named keys to the bytes a terminal sends for them (pure).

Arrow, Home and End keys depend on the application-cursor mode (DECCKM)
that the program switched on or off: `ESC O A` in that mode, `ESC [ A`
otherwise, as xterm does.
"""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.server.errors import InvalidArgument

_CURSOR_KEYS = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_FIXED = {
    "enter": b"\r",
    "return": b"\r",
    "tab": b"\t",
    "space": b" ",
    "backspace": b"\x7f",
    "escape": b"\x1b",
    "esc": b"\x1b",
    "insert": b"\x1b[2~",
    "delete": b"\x1b[3~",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "f1": b"\x1bOP",
    "f2": b"\x1bOQ",
    "f3": b"\x1bOR",
    "f4": b"\x1bOS",
    "f5": b"\x1b[15~",
    "f6": b"\x1b[17~",
    "f7": b"\x1b[18~",
    "f8": b"\x1b[19~",
    "f9": b"\x1b[20~",
    "f10": b"\x1b[21~",
    "f11": b"\x1b[23~",
    "f12": b"\x1b[24~",
}


def key_bytes(name: str, *, app_cursor: bool) -> bytes | None:
    key = name.strip().lower()
    if key in _FIXED:
        return _FIXED[key]
    if key in _CURSOR_KEYS:
        return (b"\x1bO" if app_cursor else b"\x1b[") + _CURSOR_KEYS[key].encode()
    modifier, _, letter = key.partition("+")
    if len(letter) == 1 and letter.isascii() and letter.isalpha():
        if modifier == "ctrl":
            return bytes([ord(letter) & 0x1F])
        if modifier == "alt":
            return b"\x1b" + letter.encode()
    return None


def encode_keys(names: list[str], *, app_cursor: bool) -> bytes:
    out = bytearray()
    for index, name in enumerate(names):
        data = key_bytes(name, app_cursor=app_cursor)
        if data is None:
            raise InvalidArgument(messages.UNKNOWN_KEY.format(key=name, index=index))
        out += data
    return bytes(out)
