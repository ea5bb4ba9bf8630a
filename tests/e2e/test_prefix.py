"""The settings' `prefix`: shell text put before every command, with one space
between, as the settings page says; and that page's own example, which must work
in front of any command, compound ones included."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from tests.conftest import SpawnInProcess

SETTINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
NICENESS = "5"
COMPOUND_COMMANDS = [
    "nice",
    "for i in 1 2; do nice; done",
    "if true; then nice; fi",
    "while true; do nice; break; done",
    "case x in x) nice ;; esac",
    "{ nice; }",
    "echo start >/dev/null\nnice | cat",
    "sleep 0 & wait; nice",
]


def documented_prefix() -> str:
    """The `prefix` line of the settings page's example, as TOML reads it."""
    found = re.search(r"^prefix = .*$", SETTINGS_PAGE.read_text(), flags=re.MULTILINE)
    assert found is not None, "the settings page's example has no prefix"
    prefix = msgspec.toml.decode(found.group(0).encode())["prefix"]
    assert isinstance(prefix, str)
    return prefix


def settings_with(prefix: str) -> str:
    return f"prefix = {msgspec.json.encode(prefix).decode()}\n"


def test_a_prefix_is_text_before_the_command(spawn: SpawnInProcess) -> None:
    """A wrapper such as `nice -n 5` works for a simple command only: before
    `for` it makes a syntax error, and in `a; b` it wraps `a` alone."""
    server = spawn(settings_with("nice -n 5"))
    assert server.bash("nice").output == f"{NICENESS}\n"
    broken = server.bash("for i in 1; do nice; done")
    assert broken.exit_code == 2 and "syntax error" in broken.output
    assert server.bash("nice; nice").output == f"{NICENESS}\n0\n"


@pytest.mark.parametrize("command", COMPOUND_COMMANDS)
def test_the_documented_prefix_works_before_any_command(
    spawn: SpawnInProcess, command: str
) -> None:
    server = spawn(settings_with(documented_prefix()))
    first = server.bash(command)
    assert first.exit_code == 0, first.output
    assert set(first.output.split()) == {NICENESS}
    # Again, in the same shell: setting the niceness twice changes nothing.
    again = server.bash(command)
    assert again.exit_code == 0 and again.output == first.output


def test_the_documented_prefix_works_on_a_pty(spawn: SpawnInProcess) -> None:
    server = spawn(settings_with(documented_prefix()))
    result = server.bash("for i in 1 2; do nice; done", pty=True)
    assert result.exit_code == 0
    assert result.output.split() == [NICENESS, NICENESS]
