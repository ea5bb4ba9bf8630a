"""What `terminal/create` runs in a shell and what it runs as a program: the rule
that lets ACP's SDKs send `[]` for "no arguments"."""

from __future__ import annotations

import pytest

from bashrpc.server.services.terminals import JobStart, runs_in_shell

SHELL_TEXT: list[tuple[str, list[str] | None]] = [
    ("echo one two", None),
    ("ls", None),
    ("echo one two", []),
    ("make|tee log", []),
    ("FOO=1", []),
    ("~/bin/tool", []),
    ("$HOME/bin/tool", []),
    ("ls *.py", []),
    ("ls\n", []),
    ("'ls'", []),
    ("", []),
]
PROGRAMS: list[tuple[str, list[str]]] = [
    ("ls", []),
    ("/usr/bin/env", []),
    ("./run-tests.sh", []),
    ("python3.11", []),
    ("g++", []),
    ("echo one two", ["three"]),
    ("ls", ["-l", "$HOME"]),
]


@pytest.mark.parametrize(("command", "args"), SHELL_TEXT)
def test_shell_text(command: str, args: list[str] | None) -> None:
    assert runs_in_shell(command, args)
    assert JobStart("s", command, args=args).args is None


@pytest.mark.parametrize(("command", "args"), PROGRAMS)
def test_a_program(command: str, args: list[str]) -> None:
    assert not runs_in_shell(command, args)
    assert JobStart("s", command, args=args).args == args
