"""The persistent shell's protocol text and status records (pure)."""

from __future__ import annotations

import shlex
import subprocess

from server.runtime.shellproto import (
    ERR_WRAPPER,
    RecordReader,
    StatusRecord,
    command_fields,
    driver_line,
    parse_traps,
)


def record_bytes(status: int, pwd: bytes, flags: str, traps: str, last_job: str = "") -> bytes:
    return traps.encode() + b"\0%d\0%s\0%s\0%s\0" % (status, pwd, flags.encode(), last_job.encode())


def test_records_survive_every_split() -> None:
    data = record_bytes(0, b"/tmp", "hB", "") + record_bytes(
        3, b"/d\xff", "hxB", "trap -- 'x' ERR\n", last_job="42"
    )
    for cut in range(len(data) + 1):
        reader = RecordReader()
        records = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert [r.status for r in records] == [0, 3]
        assert records[0].last_job is None and records[1].last_job == 42
        assert records[1].traps == "trap -- 'x' ERR\n"
        assert records[1].pwd.encode("utf-8", "surrogateescape") == b"/d\xff"


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
    line = driver_line(5, ["A", "B_2"])
    assert b'A="${__bashrpc_env[0]}" B_2="${__bashrpc_env[1]}"' in line
    # Everything else travels in the fields file; the line stays short.
    assert len(driver_line(5, [])) < 128


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
