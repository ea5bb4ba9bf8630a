"""The persistent shell's protocol text and status records (pure)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from bashrpc.server.runtime.shell.shellproto import (
    ERR_WRAPPER,
    MAX_RECORD_BYTES,
    BadRecord,
    RecordReader,
    StatusRecord,
    command_fields,
    driver_line,
    parse_traps,
)

TOKEN = "0123456789abcdef0123456789abcdef"


def record_bytes(
    status: int, pwd: bytes, flags: str, traps: str, last_job: str = "", token: str = TOKEN
) -> bytes:
    fields = (b"%d" % status, pwd, flags.encode(), last_job.encode(), token.encode())
    return traps.encode() + b"".join(b"\0" + f for f in fields) + b"\0"


def reader(token: str = TOKEN) -> RecordReader:
    records = RecordReader()
    records.expect(token)
    return records


def test_records_survive_every_split() -> None:
    first, second = (
        record_bytes(0, b"/tmp", "hB", ""),
        record_bytes(3, b"/d\xff", "hxB", "trap -- 'x' ERR\n", last_job="42"),
    )
    for data in (first, second):
        for cut in range(len(data) + 1):
            records = reader()
            got = [records.feed(data[:cut]), records.feed(data[cut:])]
            assert len([r for r in got if r is not None]) == 1
    one, two = reader().feed(first), reader().feed(second)
    assert one is not None and two is not None
    assert (one.status, two.status) == (0, 3)
    assert one.last_job is None and two.last_job == 42
    assert two.traps == "trap -- 'x' ERR\n" and two.flags == "hxB"
    assert two.pwd.encode("utf-8", "surrogateescape") == b"/d\xff"


@pytest.mark.parametrize(
    "data",
    [
        # The record a command forges, before the true one: no token, or another one.
        b"\0007\0/\0hB\0\0" + record_bytes(0, b"/", "hB", ""),
        record_bytes(7, b"/", "hB", "", token="f" * 32),
        record_bytes(0, b"/", "hB", "", token=TOKEN[:-1]),
        # Malformed: the reader must not raise anything else.
        b"x\0y\0z\0w\0v\0" + TOKEN.encode() + b"\0",
        record_bytes(0, b"/", "h B", ""),
        record_bytes(0, b"/", "hB", "trap -- 'unbalanced DEBUG\n"),
        record_bytes(0, b"/", "hB", "", last_job="-1"),
        record_bytes(1000, b"/", "hB", ""),
        # A true record, then anything.
        record_bytes(0, b"/", "hB", "") + b"x",
    ],
)
def test_anything_but_the_expected_record_is_bad(data: bytes) -> None:
    with pytest.raises(BadRecord):
        reader().feed(data)


def test_a_record_when_none_is_expected_is_bad() -> None:
    records = reader()
    assert records.feed(record_bytes(0, b"/", "hB", "")) is not None
    with pytest.raises(BadRecord):
        records.feed(record_bytes(0, b"/", "hB", ""))
    with pytest.raises(BadRecord):
        RecordReader().feed(b"\0")


def test_junk_is_scanned_once_and_bounded() -> None:
    # A chunk at a time, as the FIFO is read: the reader never holds more than
    # its bound, and each byte is looked at once (a re-split per read took
    # seconds for less than a mebibyte).
    records, chunk, fed = reader(), b"j" * 4096, 0
    with pytest.raises(BadRecord):
        while fed <= 10 * MAX_RECORD_BYTES:
            records.feed(chunk)
            fed += len(chunk)
    assert fed <= MAX_RECORD_BYTES
    # NULs in the junk change nothing: at the sixth field the token is checked.
    with pytest.raises(BadRecord):
        reader().feed(b"\0" * 4096)


def bash_quoted(code: str) -> str:
    """A word as bash's `trap -p` writes it (`sh_single_quote`)."""
    return "\\'" if code == "'" else "'" + code.replace("'", "'\\''") + "'"


def shown_by_bash(traps: dict[str, str]) -> str:
    """What the real `trap -p` prints for these traps."""
    script = "".join(f"trap -- {shlex.quote(code)} {signal}; " for signal, code in traps.items())
    # The traps' own output (DEBUG runs before `trap -p`) is not what is read.
    script = f"{{ {script}trap -p DEBUG ERR RETURN >&3; }} 3>&1 >/dev/null 2>&1"
    shown = subprocess.run(
        ["bash"], input=script.encode("utf-8", "surrogateescape"), capture_output=True, check=True
    )
    return shown.stdout.decode("utf-8", "surrogateescape")


# Codes whose quoting has edges: quotes alone and in runs, next to backslashes,
# what looks like an escaped quote or a trap line, newlines, controls, bytes
# that are not UTF-8.
HOSTILE_CODES = [
    "",
    "'",
    "''",
    "'''",
    "\\",
    "\\'",
    "'\\''",
    "a'\\''b",
    "\\''\\",
    "echo 'it''s' \"$X\"\nline two",
    "x' DEBUG\ntrap -- 'y",
    "' ERR\n",
    "tab\there\r\x01\x7f",
    "caf\u00e9 \udcff",
]


@pytest.mark.parametrize("code", HOSTILE_CODES)
def test_traps_read_back_as_bash_printed_them(code: str) -> None:
    text = shown_by_bash({"DEBUG": code, "RETURN": "false"})
    assert text == f"trap -- {bash_quoted(code)} DEBUG\ntrap -- 'false' RETURN\n"
    assert parse_traps(text) == {"DEBUG": code, "RETURN": "false"}


def test_every_suspended_trap_reads_back() -> None:
    traps = {"DEBUG": "a'b", "ERR": "'", "RETURN": ""}
    assert parse_traps(shown_by_bash(traps)) == traps
    assert parse_traps("") == {}
    # The last line's newline is not required.
    assert parse_traps("trap -- 'x' ERR") == {"ERR": "x"}


@pytest.mark.parametrize(
    "text",
    [
        "trap -- 'x' DEBUG\njunk",
        "trap -- 'x' EXIT\n",
        "trap -- 'x' DEBUG ERR\n",
        "trap -- 'unbalanced DEBUG\n",
        "trap -- 'x'y' DEBUG\n",
        "trap -- x DEBUG\n",
        'trap -- "x" DEBUG\n',
        "trap -- $'x' DEBUG\n",
        "trap -- 'x' DEBUGtrap -- 'y' ERR\n",
        "trap -- 'x\0' DEBUG\n",
        "trap 'x' DEBUG\n",
        " trap -- 'x' DEBUG\n",
        "trap -- 'x' DEBUG\n\n",
        "trap -- '" + "'\\''" * 1000 + " DEBUG\n",
    ],
)
def test_what_bash_never_prints_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_traps(text)


@pytest.mark.parametrize("piece", ["a", "'", "'\\''", "\\", "\\'", "' DEBUG\n"])
def test_a_trap_of_the_largest_size_reads_back_whole(piece: str) -> None:
    """Up to the record's bound, whatever the code repeats: the read is linear (this
    many quotes kept shlex busy for minutes)."""
    code = (piece * MAX_RECORD_BYTES)[: MAX_RECORD_BYTES // 4]
    text = f"trap -- {bash_quoted(code)} DEBUG\n"
    assert parse_traps(text) == {"DEBUG": code}
    # Cut anywhere near its end, it is refused, not misread.
    for cut in range(2, 12):
        with pytest.raises(ValueError):
            parse_traps(text[:-cut])
    # The restore prefix is built in linear time too (bash then reads it for as
    # long as it takes: that is the session's own shell).
    prefix = StatusRecord(status=0, pwd="/", flags="", traps=text).restore_prefix()
    assert prefix.startswith("\\builtin trap -- ") and prefix.endswith(" DEBUG")


def test_restore_prefix_puts_traps_and_xtrace_back() -> None:
    none = StatusRecord(status=0, pwd="/", flags="hB", traps="")
    assert none.restore_prefix() == ""
    record = StatusRecord(
        status=0, pwd="/", flags="hxB", traps="trap -- 'echo d' DEBUG\ntrap -- 'echo e' ERR\n"
    )
    prefix = record.restore_prefix()
    assert "trap -- 'echo d' DEBUG" in prefix
    assert "__bashrpc_err='echo e'" in prefix
    assert f"trap -- {shlex.quote(ERR_WRAPPER)} ERR" in prefix
    assert prefix.endswith("set -x") and "\n" not in prefix
    # An ERR trap that is still our wrapper keeps the user's code where it is.
    kept = StatusRecord(
        status=0, pwd="/", flags="", traps=f"trap -- {bash_quoted(ERR_WRAPPER)} ERR\n"
    )
    assert "__bashrpc_err=" not in kept.restore_prefix()


def test_only_validated_names_reach_the_driver_line() -> None:
    line = driver_line(TOKEN, "o.out", ["A", "B_2"])
    assert b'A="${__bashrpc_env[0]}" B_2="${__bashrpc_env[1]}"' in line
    assert line.endswith(f'__bashrpc_done "$__bashrpc_status" {TOKEN}\n'.encode())
    # Everything else but the output FIFO's name travels in the fields file
    # (which a command can read); the line stays short.
    assert driver_line(TOKEN, "o.out", []) == f"__bashrpc_o=o.out; __bashrpc_go {TOKEN}\n".encode()


def test_fields_carry_the_command_after_its_restore_prefix() -> None:
    fields = command_fields(cwd=None, prefix="set -x", command="echo $x", env={"A": "1"})
    assert fields == b"\0set -x\necho $x\0001\0"
    # No prefix: the command is still on the second line of the eval'd text.
    assert command_fields(cwd=None, prefix="", command="x", env={}) == b"\0\nx\0"


@pytest.mark.parametrize("code", ["echo 'a'\necho \\b \"$X\" $'c'", *HOSTILE_CODES])
def test_the_restore_prefix_is_one_line_whatever_the_traps_hold(code: str) -> None:
    record = StatusRecord(
        status=0, pwd="/", flags="", traps=f"trap -- {bash_quoted(code)} RETURN\n"
    )
    prefix = record.restore_prefix()
    assert "\n" not in prefix
    # bash reads the trap's code back as it was.
    script = f"{prefix}; trap -p RETURN".encode("utf-8", "surrogateescape")
    shown = subprocess.run(["bash"], input=script, capture_output=True, check=True)
    assert parse_traps(shown.stdout.decode("utf-8", "surrogateescape")) == {"RETURN": code}
