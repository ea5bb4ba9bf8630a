"""Which tenant a connection's `initialize` names."""

from __future__ import annotations

from bashrpc.server.daemon.tenants import tenant_key


def test_a_scope_names_one_tenant_whatever_the_client() -> None:
    assert tenant_key("alice", "team") == tenant_key("bob", "team") == tenant_key(None, "team")
    assert tenant_key("alice", "team") != tenant_key("alice", "other")


def test_without_a_scope_a_client_has_its_own_and_no_client_none() -> None:
    assert tenant_key("alice", None) != tenant_key("bob", None)
    assert tenant_key(None, None) is None


def test_a_scope_and_a_client_of_the_same_name_are_apart() -> None:
    assert tenant_key("team", None) != tenant_key(None, "team")
