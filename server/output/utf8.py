"""UTF-8 byte-level helpers shared by the sink and artifact reads."""

MAX_CONTINUATION_BYTES = 3


def char_start(buf: bytes | bytearray, index: int) -> int:
    """First index at or after ``index`` that begins a UTF-8 character."""
    end = len(buf)
    while index < end and (buf[index] & 0xC0) == 0x80:
        index += 1
    return index


def is_continuation(byte: int) -> bool:
    return (byte & 0xC0) == 0x80
