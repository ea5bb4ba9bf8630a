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


def test_traps_read_back_as_bash_quoted_them() -> None:
    code = "echo 'it''s' \"$X\"\nline two"
    text = f"trap -- {shlex.quote(code)} DEBUG\ntrap -- 'false' RETURN\n"
    assert parse_traps(text) == {"DEBUG": code, "RETURN": "false"}
    assert parse_traps("") == {}


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
        status=0, pwd="/", flags="", traps=f"trap -- {shlex.quote(ERR_WRAPPER)} ERR\n"
    )
    assert "__bashrpc_err=" not in kept.restore_prefix()


def test_only_validated_names_reach_the_driver_line() -> None:
    line = driver_line(TOKEN, ["A", "B_2"])
    assert b'A="${__bashrpc_env[0]}" B_2="${__bashrpc_env[1]}"' in line
    assert line.endswith(f'__bashrpc_done "$__bashrpc_status" {TOKEN}\n'.encode())
    # Everything else travels in the fields file; the line stays short.
    assert driver_line(TOKEN, []) == f"__bashrpc_go {TOKEN}\n".encode()


def test_fields_carry_the_command_after_its_restore_prefix() -> None:
    fields = command_fields(
        output="/o", cwd=None, prefix="set -x", command="echo $x", env={"A": "1"}
    )
    assert fields == b"/o\0\0set -x\necho $x\0001\0"
    # No prefix: the command is still on the second line of the eval'd text.
    assert command_fields(output="/o", cwd=None, prefix="", command="x", env={}) == b"/o\0\0\nx\0"


def test_the_restore_prefix_is_one_line_whatever_the_traps_hold() -> None:
    code = "echo 'a'\necho \\b \"$X\" $'c'"
    record = StatusRecord(
        status=0, pwd="/", flags="", traps=f"trap -- {shlex.quote(code)} RETURN\n"
    )
    prefix = record.restore_prefix()
    assert "\n" not in prefix
    # bash reads the trap's code back as it was.
    shown = subprocess.run(
        ["bash", "-c", f"{prefix}; trap -p RETURN"], capture_output=True, text=True, check=True
    )
    assert parse_traps(shown.stdout) == {"RETURN": code}
