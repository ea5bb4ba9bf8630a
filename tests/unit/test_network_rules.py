"""The allowlist's decisions (pure): names, wildcards' edges, addresses, narrowing."""

from __future__ import annotations

import ipaddress

import pytest

from bashrpc.protocol.methods import NetworkMode
from bashrpc.server.runtime.network import rules
from bashrpc.server.runtime.seam.egress import Egress

EGRESS = Egress(
    allow=(
        "index.example.org",
        "*.files.example.org",
        "Git.Example.com.",
        "203.0.113.7",
        "10.1.2.3",
    ),
    deny=("bad.files.example.org",),
)


@pytest.mark.parametrize(
    ("host", "port", "allowed", "reason"),
    [
        ("index.example.org", 443, True, "allowed"),
        ("INDEX.Example.ORG.", 443, True, "allowed"),
        ("index.example.org", 80, True, "allowed"),
        ("index.example.org", 22, False, "port"),
        ("sub.index.example.org", 443, False, "not-allowed"),
        # The wildcard matches subdomains only, at any depth.
        ("a.files.example.org", 443, True, "allowed"),
        ("a.b.files.example.org", 443, True, "allowed"),
        ("files.example.org", 443, False, "not-allowed"),
        ("evilfiles.example.org", 443, False, "not-allowed"),
        ("a.files.example.org.evil.net", 443, False, "not-allowed"),
        ("files.example.org.evil.net", 443, False, "not-allowed"),
        ("xfiles.example.org", 443, False, "not-allowed"),
        # Deny wins over a matching wildcard.
        ("bad.files.example.org", 443, False, "denied"),
        ("BAD.files.example.org.", 443, False, "denied"),
        ("git.example.com", 443, True, "allowed"),
        ("git.example.com.evil.net", 443, False, "not-allowed"),
        ("evilgit.example.com", 443, False, "not-allowed"),
        # IP literals: only those listed.
        ("203.0.113.7", 443, True, "allowed"),
        ("203.0.113.8", 443, False, "not-allowed"),
        ("[::ffff:203.0.113.7]", 443, True, "allowed"),
        ("::1", 443, False, "not-allowed"),
        ("127.0.0.1", 80, False, "not-allowed"),
        # Not a name at all.
        ("", 443, False, "invalid"),
        ("a..b", 443, False, "invalid"),
        ("exa mple.org", 443, False, "invalid"),
        ("ex\u00e4mple.org", 443, False, "invalid"),
        ("-a.example.org", 443, False, "invalid"),
        ("a" * 64 + ".org", 443, False, "invalid"),
    ],
)
def test_names(host: str, port: int, allowed: bool, reason: str) -> None:
    decision = rules.decide_name(EGRESS, host, port)
    assert (decision.allowed, decision.reason) == (allowed, reason)


def test_the_decision_names_the_rule() -> None:
    assert rules.decide_name(EGRESS, "x.files.example.org", 443).rule == "*.files.example.org"
    assert rules.decide_name(EGRESS, "bad.files.example.org", 443).rule == "bad.files.example.org"


def test_a_wildcard_never_matches_an_ip_literal() -> None:
    egress = Egress(allow=("*.0.113.7",))
    assert not rules.decide_name(egress, "203.0.113.7", 443).allowed


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("127.1.2.3", False),
        ("::1", False),
        ("169.254.169.254", False),
        ("fe80::1", False),
        ("10.0.0.5", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("100.64.0.1", False),
        ("fc00::1", False),
        ("224.0.0.251", False),
        ("239.255.255.250", False),
        ("ff02::1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:93.184.216.34", True),
        # A private address listed as a literal is allowed, and only that one.
        ("10.1.2.3", True),
        ("10.1.2.4", False),
    ],
)
def test_resolved_addresses(address: str, allowed: bool) -> None:
    decision = rules.decide_address(EGRESS, ipaddress.ip_address(address))
    assert decision.allowed is allowed
    if not allowed:
        assert decision.reason == "address"


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("example.com", None),
        ("*.example.com", None),
        ("EXAMPLE.com.", None),
        ("10.0.0.1", None),
        ("::1", None),
        ("*example.com", "wildcard"),
        ("a.*.example.com", "wildcard"),
        ("*.*.example.com", "wildcard"),
        ("*.com", "two labels"),
        ("*.10.0.0.1", "two labels"),
        ("exa mple.com", "not a host"),
        ("", "not a host"),
    ],
)
def test_patterns(entry: str, error: str | None) -> None:
    found = rules.pattern_error(entry)
    assert (found is None) if error is None else (found is not None and error in found)


SERVER = Egress(allow=("*.example.org", "git.example.com"), deny=("paste.example.org",))


@pytest.mark.parametrize(
    ("mode", "asked_mode", "asked", "result"),
    [
        ("allowlist", "host", None, "wider"),
        ("off", "allowlist", None, "wider"),
        ("allowlist", "off", None, ("off", SERVER)),
        ("allowlist", "allowlist", None, ("allowlist", SERVER)),
        ("host", "host", None, ("host", SERVER)),
        (
            "allowlist",
            "allowlist",
            Egress(allow=("a.example.org", "*.b.example.org"), deny=("x.example.org",)),
            (
                "allowlist",
                Egress(
                    allow=("a.example.org", "*.b.example.org"),
                    deny=("paste.example.org", "x.example.org"),
                ),
            ),
        ),
        ("allowlist", "allowlist", Egress(allow=("example.org",)), "outside"),
        ("allowlist", "allowlist", Egress(allow=("*.git.example.com",)), "outside"),
        ("allowlist", "allowlist", Egress(allow=("evil.net",)), "outside"),
        ("allowlist", "allowlist", Egress(allow=("a.example.org",), ports=(22,)), "ports"),
        ("allowlist", "allowlist", Egress(allow=("a.example.org",), ports=(443,)), "ok"),
        ("host", "allowlist", Egress(allow=("evil.net",), ports=(22,)), "ok"),
    ],
)
def test_a_session_narrows_never_widens(
    mode: NetworkMode,
    asked_mode: NetworkMode,
    asked: Egress | None,
    result: object,
) -> None:
    got = rules.narrow(mode, SERVER, asked_mode, asked)
    if result == "ok":
        assert isinstance(got, tuple) and asked is not None
        assert got[1].allow == asked.allow and got[1].ports == asked.ports
        assert set(SERVER.deny) <= set(got[1].deny)
    elif isinstance(result, str):
        assert isinstance(got, str) and result in got
    else:
        assert got == result
