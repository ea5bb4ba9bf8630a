"""The Streamable HTTP listener's rules against DNS rebinding: which `Host` and
`Origin` a loopback listener answers, and that elsewhere no browser comes in."""

from __future__ import annotations

import pytest

from bashrpc.server.daemon.httpframe import HttpRequest
from bashrpc.server.daemon.mcpgate import allowed_hosts, rebinding
from bashrpc.server.daemon.wsconfig import ListenAddress

LOOPBACK = ListenAddress("127.0.0.1", 8123)
ANYWHERE = ListenAddress("0.0.0.0", 8123)


def request(headers: dict[str, str]) -> HttpRequest:
    return HttpRequest("POST", "/mcp", {k.lower(): [v] for k, v in headers.items()}, b"")


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "127.0.0.1:8123"},
        {"Host": "localhost:8123", "Origin": "http://localhost:8123"},
        {"Host": "[::1]:8123", "Origin": "https://127.0.0.1:8123"},
        {"Host": "LOCALHOST"},
    ],
)
def test_loopback_names_are_let_in(headers: dict[str, str]) -> None:
    assert rebinding(request(headers), LOOPBACK, allowed_hosts(LOOPBACK, 8123)) is None


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Host": "evil.example"},
        {"Host": "evil.example:8123"},
        {"Host": "127.0.0.1:9999"},
        {"Host": "127.0.0.1:8123", "Origin": "http://evil.example"},
        {"Host": "127.0.0.1:8123", "Origin": "http://localhost:9999"},
        {"Host": "127.0.0.1:8123", "Origin": "null"},
    ],
)
def test_a_name_that_is_not_loopback_is_refused(headers: dict[str, str]) -> None:
    assert rebinding(request(headers), LOOPBACK, allowed_hosts(LOOPBACK, 8123)) is not None


def test_off_loopback_any_host_but_no_browser() -> None:
    hosts = allowed_hosts(ANYWHERE, 8123)
    assert rebinding(request({"Host": "mcp.example.com"}), ANYWHERE, hosts) is None
    assert rebinding(request({"Origin": "https://mcp.example.com"}), ANYWHERE, hosts) is not None
