"""The idle-exit rule of the daemon."""

from __future__ import annotations

from bashrpc.server.daemon.idle import IdleClock


def test_a_daemon_that_never_saw_a_client_exits_after_the_idle_time() -> None:
    clock = IdleClock(5.0, now=100.0)
    assert not clock.expired(104.9)
    assert clock.expired(105.0)


def test_a_connection_holds_the_daemon_and_the_count_restarts_when_it_ends() -> None:
    clock = IdleClock(5.0, now=0.0)
    clock.note(1.0, holding=1)
    assert not clock.expired(50.0)
    clock.note(50.0, holding=0)
    assert not clock.expired(54.0)
    clock.note(54.0, holding=0)  # still idle: the count goes on from 50
    assert clock.expired(55.0)


def test_stay_never_expires() -> None:
    clock = IdleClock(None, now=0.0)
    assert not clock.expired(1e9)
