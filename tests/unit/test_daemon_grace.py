"""The detach grace of an owner's sessions."""

from __future__ import annotations

from bashrpc.server.daemon.grace import Grace


def test_sessions_outlive_the_last_connection_for_the_grace() -> None:
    grace = Grace(300.0)
    grace.attach()
    assert grace.deadline() is None and not grace.expired(1e9)
    grace.detach(now=10.0)
    assert grace.deadline() == 310.0
    assert not grace.expired(309.9)
    assert grace.expired(310.0)


def test_a_connection_back_within_the_grace_keeps_them_and_restarts_the_count() -> None:
    grace = Grace(5.0)
    grace.attach()
    grace.detach(now=0.0)
    grace.attach()
    assert not grace.expired(100.0)
    grace.detach(now=100.0)
    assert grace.deadline() == 105.0


def test_only_the_last_of_several_connections_starts_the_count() -> None:
    grace = Grace(5.0)
    grace.attach()
    grace.attach()
    grace.detach(now=1.0)
    assert grace.deadline() is None
    grace.detach(now=2.0)
    assert grace.deadline() == 7.0


def test_no_grace_ends_at_once() -> None:
    grace = Grace(0.0)
    grace.attach()
    grace.detach(now=3.0)
    assert grace.expired(3.0)
