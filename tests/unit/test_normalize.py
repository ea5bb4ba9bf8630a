import pytest

from bashrpc.server.services.tool.normalize import Normalized, normalize


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls | head -n 5", Normalized("ls", 5, None)),
        ("ls | head -n5", Normalized("ls", 5, None)),
        ("ls | head -5", Normalized("ls", 5, None)),
        ("ls | tail -n 7", Normalized("ls", None, 7)),
        ("ls | tail -7", Normalized("ls", None, 7)),
        ("ls|head -3   ", Normalized("ls", 3, None)),
        ("  make 2>&1 | tail -20  ", Normalized("make 2>&1", None, 20)),
        ("a | b | head -2", Normalized("a | b", 2, None)),
    ],
)
def test_extracted_forms(command: str, expected: Normalized) -> None:
    assert normalize(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "ls | head",
        "ls | head -c 100",
        "ls | head -5 | sort",
        "ls || head -5",
        "echo a \\| head -5",
        "echo 'x | head -5'",
        "| head -5",
        "ls | head -n",
        "ls | tail -f",
        "ls | tail -n +5",
        "ls 2>&1",
    ],
)
def test_left_alone(command: str) -> None:
    assert normalize(command) == Normalized(command.strip(), None, None)


def test_trims_but_keeps_inner_whitespace_and_heredocs() -> None:
    command = "  cat <<'EOF'\n  indented\n\tand tabbed\nEOF\n\n"
    assert normalize(command).command == "cat <<'EOF'\n  indented\n\tand tabbed\nEOF"


def test_explicit_arguments_win() -> None:
    assert normalize("ls | head -5", head=2) == Normalized("ls", 2, None)
    assert normalize("ls | tail -5", tail=9) == Normalized("ls", None, 9)
    assert normalize("ls | head -5", tail=3) == Normalized("ls", 5, 3)


def test_only_one_trailing_pipe_is_extracted() -> None:
    assert normalize("ls | head -5 | tail -2") == Normalized("ls | head -5", None, 2)
