"""The redactor, table-driven: every kind, every encoding, overlaps, a secret
inside another, UTF-8 and ANSI around it, each case cut at every split point."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse

import pytest

from bashrpc.protocol import messages
from bashrpc.server.output.matcher import HAVE_HYPERSCAN, FindMatcher, HyperscanMatcher
from bashrpc.server.output.redact import Redactor, SecretTable, redact_text
from bashrpc.server.output.secretforms import DEFAULT_FORMATS, check_secret, forms

TOKEN = b"s3cr3t-Value_0042"
ODD = b'p@ss w/"quote"&=\xc3\xa9'
VALUES = {"API_TOKEN": TOKEN, "ODD_PASSWORD": ODD, "LONGER": b"prefix-" + TOKEN + b"-suffix"}
GH = b"ghp_" + b"A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GL = b"glpat-" + b"x9Y8z7W6v5U4t3S2r1Q0"
SLACK = b"xoxb-1234567890-0987654321-AbCdEfGhIjKl"
STRIPE = b"sk_live_" + b"4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE = b"AIza" + b"SyA-1234567890abcdefghijklmnopqrstu"
OPENAI = b"sk-proj-" + b"Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = b"sk-ant-api03-" + b"Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
JWT = (
    b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
AWS_ID = b"AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    b"AAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQ\n-----END OPENSSH PRIVATE KEY-----"
)


def r(name: str) -> bytes:
    return messages.REDACTED.format(name=name).encode()


def b64_inside(before: bytes, value: bytes, after: bytes) -> bytes:
    return base64.b64encode(before + value + after)


CASES: list[tuple[str, bytes, bytes | None]] = [
    # (id, input, expected output; None: only "no raw value survives" is checked)
    ("plain", b"token=" + TOKEN + b"\n", b"token=" + r("API_TOKEN") + b"\n"),
    ("alone", TOKEN, r("API_TOKEN")),
    ("twice", TOKEN + TOKEN, r("API_TOKEN") * 2),
    ("twice-spaced", TOKEN + b" " + TOKEN, r("API_TOKEN") + b" " + r("API_TOKEN")),
    ("at-start-of-line", b"a\n" + TOKEN + b"\nb", b"a\n" + r("API_TOKEN") + b"\nb"),
    ("url-encoded", urllib.parse.quote(ODD, safe="").encode(), r("ODD_PASSWORD")),
    ("url-plus", urllib.parse.quote_plus(ODD, safe="").encode(), r("ODD_PASSWORD")),
    ("json-escaped", b'{"p": "' + json.dumps(ODD.decode())[1:-1].encode() + b'"}', None),
    ("json-raw-utf8", json.dumps(ODD.decode(), ensure_ascii=False).encode(), None),
    ("exact-odd", b"<" + ODD + b">", b"<" + r("ODD_PASSWORD") + b">"),
    ("base64-align-0", b64_inside(b"", TOKEN, b""), None),
    ("base64-align-1", b64_inside(b"x", TOKEN, b"yz"), None),
    ("base64-align-2", b64_inside(b"xy", TOKEN, b"z"), None),
    ("base64-in-text", b"Basic " + b64_inside(b"user:", TOKEN, b"") + b"\n", None),
    ("base64-urlsafe", base64.urlsafe_b64encode(b"\xff\xfe" + ODD), None),
    ("inside-another", b"x" + VALUES["LONGER"] + b"y", b"x" + r("LONGER") + b"y"),
    ("overlap", b"prefix-" + TOKEN, r("LONGER")[:0] + b"prefix-" + r("API_TOKEN")),
    (
        "utf8-around",
        "é→".encode() + TOKEN + "←ü".encode(),
        "é→".encode() + r("API_TOKEN") + "←ü".encode(),
    ),
    ("utf8-secret", ODD + "日本".encode(), r("ODD_PASSWORD") + "日本".encode()),
    ("ansi-around", b"\x1b[31m" + TOKEN + b"\x1b[0m", b"\x1b[31m" + r("API_TOKEN") + b"\x1b[0m"),
    ("cr-around", b"10%\r" + TOKEN + b"\r20%", b"10%\r" + r("API_TOKEN") + b"\r20%"),
    ("almost", TOKEN[:-1] + b"!", TOKEN[:-1] + b"!"),
    ("prefix-at-end", b"end " + TOKEN[:5], b"end " + TOKEN[:5]),
    ("no-secret", b"ordinary output\n" * 3, b"ordinary output\n" * 3),
    ("empty", b"", b""),
    ("github", b"GH=" + GH + b"\n", b"GH=" + r("github_token") + b"\n"),
    ("github-fine", b"github_pat_11ABCDEFG0123456789_abcdefghijkl", r("github_token")),
    ("gitlab", GL + b" ", r("gitlab_token") + b" "),
    ("slack", SLACK, r("slack_token")),
    ("stripe", b"key: " + STRIPE, b"key: " + r("stripe_key")),
    ("google", GOOGLE + b"\n", r("google_api_key") + b"\n"),
    ("openai", OPENAI, r("openai_key")),
    ("anthropic", ANTHROPIC, r("anthropic_key")),
    ("jwt", b"Cookie: t=" + JWT + b";", b"Cookie: t=" + r("jwt") + b";"),
    (
        "aws-pair",
        AWS_ID + b" " + AWS_SECRET + b"\n",
        r("aws_access_key_id") + b" " + r("aws_secret_access_key") + b"\n",
    ),
    ("aws-id-alone", b"id=" + AWS_ID + b"\n", b"id=" + r("aws_access_key_id") + b"\n"),
    (
        "aws-secret-next-line",
        AWS_ID + b"\n" + AWS_SECRET,
        r("aws_access_key_id") + b"\n" + AWS_SECRET,
    ),
    (
        "bearer",
        b"> Authorization: Bearer abc.DEF-123_x\n",
        b"> Authorization: Bearer " + r("bearer_token") + b"\n",
    ),
    ("bearer-prose", b"Bearer authentication is common\n", b"Bearer authentication is common\n"),
    (
        "url-password",
        b"origin https://bob:pa55-w0rd@example.com/x.git (fetch)\n",
        b"origin https://bob:" + r("url_password") + b"@example.com/x.git (fetch)\n",
    ),
    (
        "url-no-password",
        b"ssh://git@example.com:22/x http://localhost:8080/a@b\n",
        b"ssh://git@example.com:22/x http://localhost:8080/a@b\n",
    ),
    ("pem", b"key:\n" + PEM + b"\ndone\n", b"key:\n" + r("private_key") + b"\ndone\n"),
    (
        "pem-public",
        b"-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----\n",
    ),
    ("task-not-key", b"task-AbCdEf0123456789GhIjKl\n", b"task-AbCdEf0123456789GhIjKl\n"),
    ("format-and-value", TOKEN + b" " + GH, r("API_TOKEN") + b" " + r("github_token")),
    ("value-inside-url", b"https://u:" + TOKEN + b"@h", b"https://u:" + r("API_TOKEN") + b"@h"),
    (
        "sha-not-secret",
        b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  -\n",
        None,
    ),
    (
        "uuid-not-secret",
        b"123e4567-e89b-12d3-a456-426614174000\n",
        b"123e4567-e89b-12d3-a456-426614174000\n",
    ),
    ("binary-around", b"\xff\x00" + TOKEN + b"\xfe", b"\xff\x00" + r("API_TOKEN") + b"\xfe"),
    ("many-lines", (b"line\n" * 50) + TOKEN + (b"\nline" * 50), None),
]

RAW = [TOKEN, ODD, GH, GL, SLACK, STRIPE, GOOGLE, OPENAI, ANTHROPIC, JWT, AWS_ID, AWS_SECRET]
TABLE = SecretTable(VALUES)


def run(table: SecretTable, pieces: list[bytes]) -> tuple[bytes, Redactor]:
    redactor = Redactor(table)
    out = b"".join(redactor.feed(piece) for piece in pieces) + redactor.finish()
    return out, redactor


def test_there_are_fifty_cases() -> None:
    assert len(CASES) == 50 and len({case[0] for case in CASES}) == 50


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_case_at_every_split_point(data: bytes, expected: bytes | None) -> None:
    whole, _ = run(TABLE, [data])
    if expected is not None:
        assert whole == expected
    for raw in RAW:
        # A value the case means to keep (an AWS secret on another line) is in `expected`.
        if raw in data and raw not in (expected or b""):
            assert raw not in whole
    for form in forms(TOKEN) | forms(ODD):
        if len(form) >= 10 and form in data and form != b"prefix-":
            assert form not in whole, form
    for cut in range(len(data) + 1):
        assert run(TABLE, [data[:cut], data[cut:]])[0] == whole, cut
    assert run(TABLE, [data[i : i + 1] for i in range(len(data))])[0] == whole


def test_counts_by_name() -> None:
    out, redactor = run(TABLE, [TOKEN + b" " + GH + b" " + TOKEN])
    assert redactor.counts == {"API_TOKEN": 2, "github_token": 1}
    assert str(len(TOKEN)) not in out.decode()


def test_holds_back_at_most_the_longest_form_less_a_byte() -> None:
    table = SecretTable({"A_TOKEN": TOKEN}, formats=())
    redactor = Redactor(table)
    longest = max(len(form) for form in forms(TOKEN))
    for cut in range(1, len(TOKEN)):
        assert redactor.feed(TOKEN[:cut]) == b""
        assert redactor.held < longest
        assert redactor.finish() == TOKEN[:cut]
    # Text that begins no secret is never held.
    assert redactor.feed(b"done\n") == b"done\n" and redactor.held == 0


def released_run(pieces: list[bytes], table: SecretTable | None = None) -> tuple[bytes, bytes]:
    """The kept copy and the stream of `pieces`, the stream given what is held
    after each piece (as when the command goes quiet between them)."""
    redactor = Redactor(table or SecretTable({"API_TOKEN": TOKEN}, formats=()))
    kept = stream = b""
    for piece in pieces:
        let_go, streamed = redactor.feed_both(piece)
        kept, stream = kept + let_go, stream + streamed + redactor.release()
    let_go, streamed = redactor.finish_both()
    return kept + let_go, stream + streamed


@pytest.mark.parametrize("cut", range(1, len(TOKEN)))
def test_a_release_keeps_the_overlap(cut: int) -> None:
    """What is held goes to the stream when released; the kept copy still waits,
    and the rest of a secret begun in the released bytes is still redacted."""
    kept, stream = released_run([b"key: " + TOKEN[:cut], TOKEN[cut:] + b"\n"])
    assert kept == b"key: " + r("API_TOKEN") + b"\n"
    assert stream == b"key: " + TOKEN[:cut] + r("API_TOKEN") + b"\n"
    assert TOKEN not in stream


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_case_released_at_every_split_point(data: bytes, expected: bytes | None) -> None:
    """The kept copy is the same whatever was released; the stream has no secret whole."""
    whole, _ = run(TABLE, [data])
    for cut in range(len(data) + 1):
        kept, stream = released_run([data[:cut], data[cut:]], TABLE)
        assert kept == whole, cut
        for raw in RAW:
            if raw in data and raw not in (expected or b""):
                assert raw not in stream, (cut, raw)


def test_a_release_of_a_tail_that_begins_no_secret_costs_nothing() -> None:
    kept, stream = released_run([b"Password: " + TOKEN[:3], b"\n", TOKEN + b"\n"])
    assert kept == stream == b"Password: " + TOKEN[:3] + b"\n" + r("API_TOKEN") + b"\n"


def test_a_release_redacts_a_secret_it_holds_whole() -> None:
    """`LONGER` may still follow a whole `TOKEN`: the release redacts the one it has."""
    redactor = Redactor(TABLE)
    assert redactor.feed_both(b"prefix-" + TOKEN) == (b"", b"")
    assert redactor.held and redactor.release() == b"prefix-" + r("API_TOKEN")
    assert redactor.held == 0 and redactor.release() == b""
    kept, streamed = redactor.feed_both(b"-suffix\n")
    assert kept == r("LONGER") + b"\n"
    assert streamed.endswith(b"\n") and b"suffix" not in streamed
    assert redactor.counts == {"LONGER": 1}


def test_patterns_off_and_host_patterns() -> None:
    from bashrpc.server.output.secretforms import host_format

    table = SecretTable({}, formats=(host_format(0, r"INTERNAL-[0-9]{6}"),))
    assert run(table, [GH + b" INTERNAL-123456"])[0] == GH + b" " + r("pattern_1")
    with pytest.raises(ValueError, match="not a regular expression"):
        host_format(0, "(")


@pytest.mark.parametrize(("name", "value"), [("SHORT", b"1234567"), ("bad name!", TOKEN)])
def test_refused_values(name: str, value: bytes) -> None:
    with pytest.raises(ValueError):
        check_secret(name, value)
    check_secret("OK_NAME", b"12345678")


def test_redact_text_of_a_screen() -> None:
    text, counts = redact_text(TABLE, "row one " + TOKEN.decode() + "\nrow two")
    assert text == "row one [REDACTED:API_TOKEN]\nrow two" and counts == {"API_TOKEN": 1}


@pytest.mark.skipif(not HAVE_HYPERSCAN, reason="hyperscan is not installed")
def test_fallback_finds_what_hyperscan_finds() -> None:
    literals = sorted(forms(TOKEN) | forms(ODD)) + [a for f in DEFAULT_FORMATS for a in f.anchors]
    data = b" ".join(c[1] for c in CASES)
    assert sorted(FindMatcher(literals).scan(data)) == sorted(HyperscanMatcher(literals).scan(data))


def test_linear_time_on_hostile_input() -> None:
    # Anchors without their tokens, back to back: each try is bounded.
    hostile = (b"eyJ" * 5000 + b"sk-" * 5000 + b"://:" * 5000 + b"Bearer 1" * 2000) * 4
    started = time.perf_counter()
    run(TABLE, [hostile[i : i + 4096] for i in range(0, len(hostile), 4096)])
    assert time.perf_counter() - started < 20


def test_every_case_the_same_without_hyperscan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python matcher, where Hyperscan is not installed, redacts alike."""
    import bashrpc.server.output.redact as redact

    monkeypatch.setattr(redact, "matcher", FindMatcher)
    fallback = SecretTable(VALUES)
    for name, data, _expected in CASES:
        whole = run(TABLE, [data])[0]
        assert run(fallback, [data])[0] == whole, name
        assert run(fallback, [data[i : i + 3] for i in range(0, len(data), 3)])[0] == whole, name
