"""What a secret looks like in output (pure): a value's encodings, and the
token formats caught without being told their values.

A value is caught as it is, URL-encoded, JSON-escaped and base64-encoded at
each of the three alignments a value can have inside a longer base64 text
(only the characters the value alone decides, so whatever surrounds it does
not matter). What a command can do beyond that (reverse, hex, encrypt) is out
of reach: the docs say so.

A token format is a regular expression found from a literal anchor: the
matcher finds the anchor fast, and only there is the expression tried.
Every expression is bounded, so a partial token never holds back more than
its `max_len`, and none can take more than linear time.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from dataclasses import dataclass

from bashrpc.protocol import messages

# Shorter values would match ordinary output (`true`, `1234`, a common word).
MIN_SECRET_BYTES = 8
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def check_secret(name: str, value: bytes) -> None:
    """Refuse a value too short to redact, or a name that would not read as one."""
    if _NAME.fullmatch(name) is None:
        raise ValueError(messages.SECRET_NAME_INVALID.format(name=name))
    if len(value) < MIN_SECRET_BYTES:
        raise ValueError(
            messages.SECRET_TOO_SHORT.format(name=name, length=len(value), minimum=MIN_SECRET_BYTES)
        )


def forms(value: bytes) -> set[bytes]:
    """Every form of `value` that is redacted: exact, URL, JSON, base64 x 3 alignments."""
    found = {value}
    found.add(urllib.parse.quote(value, safe="").encode())
    found.add(urllib.parse.quote_plus(value, safe="").encode())
    try:
        text = value.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None:
        found.add(json.dumps(text)[1:-1].encode())
        found.add(json.dumps(text, ensure_ascii=False)[1:-1].encode())
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for pad in range(3):
            encoded = encode(b"\0" * pad + value)
            # Only the characters whose six bits all come from the value.
            start = -(-8 * pad // 6)
            end = 8 * (pad + len(value)) // 6
            found.add(encoded[start:end])
    return found


@dataclass(frozen=True)
class TokenFormat:
    """A kind of secret known by its shape: named groups, when it has any, are
    what is redacted (each by its group's name); otherwise the whole match."""

    name: str
    anchors: tuple[bytes, ...]
    regex: re.Pattern[bytes]
    # The longest match: what a partial one may hold back at the stream's edge.
    max_len: int
    # A match never spans lines, so a partial one ends with its line.
    one_line: bool = True


# Not preceded by a token character: `task-...` is no `sk-` key.
_START = rb"(?<![A-Za-z0-9_-])"


def _format(name: str, anchors: tuple[bytes, ...], pattern: bytes, max_len: int) -> TokenFormat:
    return TokenFormat(name, anchors, re.compile(pattern), max_len)


DEFAULT_FORMATS: tuple[TokenFormat, ...] = (
    TokenFormat(
        "private_key",
        (b"-----BEGIN",),
        re.compile(
            rb"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            rb"[\s\S]{0,32768}?-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        ),
        33_000,
        one_line=False,
    ),
    _format(
        "aws_access_key_id",
        (b"AKIA", b"ASIA"),
        rb"(?<![A-Z0-9])(?P<aws_access_key_id>A[KS]IA[0-9A-Z]{16})(?![A-Z0-9])"
        rb"(?:[^\n]{0,200}?(?<![A-Za-z0-9/+])"
        rb"(?P<aws_secret_access_key>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]))?",
        300,
    ),
    _format(
        "github_token",
        (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"),
        _START + rb"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,244})",
        255,
    ),
    _format("gitlab_token", (b"glpat-",), _START + rb"glpat-[A-Za-z0-9_-]{20,249}", 255),
    _format(
        "slack_token",
        (b"xoxa-", b"xoxb-", b"xoxe-", b"xoxp-", b"xoxr-", b"xoxs-"),
        _START + rb"xox[abeprs]-[A-Za-z0-9-]{10,250}",
        255,
    ),
    _format(
        "stripe_key",
        (b"sk_live_", b"sk_test_", b"rk_live_", b"rk_test_"),
        _START + rb"[rs]k_(?:live|test)_[A-Za-z0-9]{16,247}",
        255,
    ),
    _format("google_api_key", (b"AIza",), _START + rb"AIza[0-9A-Za-z_-]{35}", 39),
    _format("anthropic_key", (b"sk-ant-",), _START + rb"sk-ant-[A-Za-z0-9_-]{20,250}", 257),
    # Mixed case and a digit: `sk-` and a long hyphenated word is no key.
    _format(
        "openai_key",
        (b"sk-",),
        _START + rb"sk-(?!ant-)(?=[A-Za-z0-9_-]{0,250}[0-9])(?=[A-Za-z0-9_-]{0,250}[A-Z])"
        rb"(?=[A-Za-z0-9_-]{0,250}[a-z])[A-Za-z0-9_-]{20,250}",
        253,
    ),
    _format(
        "jwt",
        (b"eyJ",),
        _START + rb"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{2,8192}\.[A-Za-z0-9_-]{0,4096}",
        16_400,
    ),
    # The token only, and one with a digit: "Bearer authentication" is prose.
    _format(
        "bearer_token",
        (b"Bearer ", b"bearer ", b"BEARER "),
        rb"(?i:bearer) +(?P<bearer_token>(?=[A-Za-z0-9._~+/=-]{0,4096}[0-9])"
        rb"[A-Za-z0-9._~+/=-]{8,4096})",
        4_110,
    ),
    # The password only: `https://user:[REDACTED:url_password]@host` still reads.
    _format(
        "url_password",
        (b"://",),
        rb"://[^\s:@/]{1,256}:(?P<url_password>[^\s@/]{1,256})@",
        520,
    ),
)


def host_format(index: int, pattern: str) -> TokenFormat:
    """A host's own regex from the settings: found anywhere (its anchor is empty),
    so it costs a regex search per read; bounded by the longest line it may span."""
    try:
        regex = re.compile(pattern.encode())
    except re.error as error:
        raise ValueError(
            messages.SECRET_PATTERN_INVALID.format(pattern=pattern, reason=error)
        ) from error
    return TokenFormat(f"pattern_{index + 1}", (), regex, 4096)
