"""The WebSocket listener's rules: its address, its token file, the bearer check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bashrpc.server.daemon.wsconfig import (
    ListenAddress,
    ListenError,
    bearer_refusal,
    check_start,
    parse_http_listen,
    parse_listen,
    read_token,
)
from bashrpc.server.wire.wstransport import as_line

TOKEN = "0123456789abcdef0123"


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("ws://127.0.0.1:8765", "127.0.0.1", 8765),
        ("ws://localhost:0", "127.0.0.1", 0),
        ("ws://[::1]:9/", "::1", 9),
        ("ws://0.0.0.0:80", "0.0.0.0", 80),
    ],
)
def test_listen_addresses(url: str, host: str, port: int) -> None:
    assert parse_listen(url) == ListenAddress(host, port)


@pytest.mark.parametrize(
    "url",
    [
        "wss://127.0.0.1:1",  # TLS is the router's
        "ws://127.0.0.1",  # no port
        "ws://example.com:80",  # a name: no lookup decides where shells are served
        "ws://127.0.0.1:80/path",
        "ws://127.0.0.1:99999",
        "127.0.0.1:80",
    ],
)
def test_bad_listen_addresses(url: str) -> None:
    with pytest.raises(ListenError, match="expected ws://HOST:PORT"):
        parse_listen(url)


@pytest.mark.parametrize(
    ("url", "host", "port", "path"),
    [
        ("http://127.0.0.1:8765/mcp", "127.0.0.1", 8765, "/mcp"),
        ("http://localhost:0", "127.0.0.1", 0, "/"),
        ("http://[::1]:9/a/b", "::1", 9, "/a/b"),
    ],
)
def test_http_listen_addresses(url: str, host: str, port: int, path: str) -> None:
    assert parse_http_listen(url) == (ListenAddress(host, port), path)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:1/mcp",
        "http://example.com:80/mcp",
        "http://127.0.0.1/mcp",
        "http://127.0.0.1:1/mcp?x=1",
    ],
)
def test_bad_http_listen_addresses(url: str) -> None:
    with pytest.raises(ListenError, match="or http://HOST:PORT/PATH"):
        parse_http_listen(url)


def test_no_token_only_on_loopback_and_only_when_asked() -> None:
    loopback, everywhere = ListenAddress("127.0.0.1", 1), ListenAddress("0.0.0.0", 1)
    check_start(everywhere, TOKEN, insecure_loopback=False)
    check_start(loopback, None, insecure_loopback=True)
    check_start(ListenAddress("::1", 1), None, insecure_loopback=True)
    with pytest.raises(ListenError, match="needs --token-file"):
        check_start(loopback, None, insecure_loopback=False)
    with pytest.raises(ListenError, match="not a loopback address"):
        check_start(everywhere, None, insecure_loopback=True)


def _token_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_token_file_read_without_its_newline(tmp_path: Path) -> None:
    assert read_token(_token_file(tmp_path, TOKEN + "\n")) == TOKEN
    assert read_token(_token_file(tmp_path, TOKEN, 0o400)) == TOKEN
    # A Kubernetes Secret as a non-root container gets it: its group (fsGroup) reads it.
    assert read_token(_token_file(tmp_path, TOKEN, 0o440)) == TOKEN


@pytest.mark.parametrize(
    ("text", "mode", "why"),
    [
        (TOKEN, 0o604, "others may read it"),
        (TOKEN, 0o644, "others may read it"),
        (TOKEN, 0o660, "the group write it"),
        (TOKEN, 0o602, "others may read it"),
        ("", 0o600, "at least 16"),
        ("\n", 0o600, "at least 16"),
        ("short", 0o600, "at least 16"),
        ("with a space inside it", 0o600, "no spaces"),
    ],
)
def test_token_files_refused(tmp_path: Path, text: str, mode: int, why: str) -> None:
    with pytest.raises(ListenError, match=why):
        read_token(_token_file(tmp_path, text, mode))


def test_missing_token_file(tmp_path: Path) -> None:
    with pytest.raises(ListenError, match="--token-file"):
        read_token(tmp_path / "absent")


def test_bearer_check() -> None:
    assert bearer_refusal([f"Bearer {TOKEN}"], TOKEN) is None
    assert bearer_refusal([f"bearer  {TOKEN} "], TOKEN) is None
    assert bearer_refusal([], TOKEN) == "no bearer token"
    assert bearer_refusal([f"Basic {TOKEN}"], TOKEN) == "no bearer token"
    assert bearer_refusal([f"Bearer {TOKEN}", f"Bearer {TOKEN}"], TOKEN) == "no bearer token"
    assert bearer_refusal([f"Bearer {TOKEN}x"], TOKEN) == "wrong token"
    assert bearer_refusal(["Bearer "], TOKEN) == "wrong token"


def test_a_message_is_one_line_whatever_its_whitespace() -> None:
    assert as_line(b'{"a": 1}') == b'{"a": 1}\n'
    assert as_line(b'{\n  "a": "x"\n}\n') == b'{   "a": "x" } \n'
