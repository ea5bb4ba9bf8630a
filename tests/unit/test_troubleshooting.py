"""The troubleshooting page quotes bashrpc's own words: every error message and
every line of output it shows is made of the strings in `protocol/messages.py`,
so a reworded message fails here rather than leave the page stale."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode

PAGE = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
# How a stderr line starts: the program's name and, from the log, a level.
LOG_PREFIX = re.compile(r"bashrpc: (?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )?")
# A value filled in for a placeholder (a path, an id, a count) has few words; one
# with more is a message of its own, and must be one of the templates too.
PROSE_WORDS = 3
# What the page quotes of other programs' words, inside bashrpc's messages.
FOREIGN = frozenset({"bwrap: setting up uid map: Permission denied"})
# The least fixed text a quote's outermost template has: "{field}: {problem}"
# alone would match any line with a colon.
MIN_FIXED_CHARS = 8


class Reply(msgspec.Struct):
    error: Error | None = None


class Error(msgspec.Struct):
    code: int
    message: str


def templates() -> list[str]:
    texts = [v for k, v in vars(messages).items() if k.isupper() and isinstance(v, str)]
    return [t.strip() for t in texts if t.strip()]


def fixed_chars(template: str) -> int:
    return len(re.sub(r"\{[^{}]*\}", "", template))


@cache
def pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^{}]*\}", template)
    return re.compile("(.+)".join(re.escape(part) for part in parts), flags=re.S)


def is_prose(text: str) -> bool:
    """Words, not a value: paths are values however many words they hold."""
    words = " ".join(w for w in text.split() if "/" not in w)
    return text not in FOREIGN and len(re.findall(r"[A-Za-z]{3,}", words)) >= PROSE_WORDS


@cache
def made_of_messages(text: str, min_fixed: int = 0) -> bool:
    """`text` is a template with its placeholders filled, and what fills them is
    a value or, when it reads as prose, a message made the same way (or a list
    of those: writable roots, say)."""
    parts = text.split(", ")
    listed = len(parts) > 1 and not min_fixed
    if listed and all(not is_prose(part) or made_of_messages(part) for part in parts):
        return True
    for template in templates():
        if fixed_chars(template) < min_fixed:
            continue
        match = pattern(template).fullmatch(text)
        if match is None:
            continue
        if all(not is_prose(value) or made_of_messages(value) for value in match.groups()):
            return True
    return False


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", PAGE.read_text(), flags=re.M | re.S)


def quoted_errors() -> list[Error]:
    lines = [line for block in blocks("json") for line in block.splitlines()]
    replies = [msgspec.json.decode(line, type=Reply) for line in lines]
    errors = [reply.error for reply in replies if reply.error is not None]
    assert len(errors) == len(replies), "every JSON line on the page is an error reply"
    return errors


def quoted_lines() -> list[str]:
    lines = [line for block in blocks("text") for line in block.splitlines() if line]
    return [LOG_PREFIX.sub("", line, count=1) for line in lines]


def test_the_page_quotes_errors_and_lines() -> None:
    assert len(quoted_errors()) >= len(ErrorCode)
    assert len(quoted_lines()) >= 5


@pytest.mark.parametrize(
    "quote", [e.message for e in quoted_errors()] + quoted_lines(), ids=lambda q: q[:48]
)
def test_every_quote_is_what_bashrpc_says(quote: str) -> None:
    assert made_of_messages(quote, MIN_FIXED_CHARS), quote


def test_every_error_code_is_on_the_page() -> None:
    quoted = {error.code for error in quoted_errors()}
    assert {int(code) for code in ErrorCode} - quoted == set()


def test_a_reworded_message_is_caught() -> None:
    """The check itself: a message that differs by a word, or a real template
    filled with made-up prose, is not taken for bashrpc's."""
    good = messages.SANDBOX_UNAVAILABLE.format(reason=messages.SANDBOX_NO_BWRAP)
    assert made_of_messages(good, MIN_FIXED_CHARS)
    assert not made_of_messages(good.replace("installed", "present"), MIN_FIXED_CHARS)
    made_up = messages.SANDBOX_UNAVAILABLE.format(reason="the moon is in the wrong phase")
    assert not made_of_messages(made_up, MIN_FIXED_CHARS)
