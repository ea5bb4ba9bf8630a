"""Refusals at the WebSocket listener: the per-peer slowdown and the log budget, without a clock."""

from __future__ import annotations

from bashrpc.server.daemon.wsthrottle import (
    FIRST_DELAY_SECONDS,
    FORGET_SECONDS,
    LOG_BURST,
    LOG_INTERVAL_SECONDS,
    MAX_DELAY_SECONDS,
    MAX_PEERS,
    MAX_WAIT_SECONDS,
    LogBudget,
    Slowdown,
    delay,
)

PEER = "192.0.2.1"
OTHER = "192.0.2.2"


def test_the_delay_doubles_to_its_cap() -> None:
    assert delay(0) == 0
    assert delay(1) == FIRST_DELAY_SECONDS
    assert delay(2) == 2 * FIRST_DELAY_SECONDS
    assert delay(1000) == MAX_DELAY_SECONDS


def test_a_peer_without_failures_is_checked_at_once() -> None:
    slowdown = Slowdown()
    assert slowdown.turn(PEER, 5.0) == 5.0
    assert slowdown.turn(PEER, 5.0) == 5.0


def test_failures_slow_only_their_peer() -> None:
    slowdown = Slowdown()
    now = 0.0
    for _ in range(3):
        turn = slowdown.turn(PEER, now)
        assert turn is not None
        now = turn
        slowdown.failed(PEER, now)
    assert slowdown.turn(PEER, now) == now + delay(3)
    assert slowdown.turn(OTHER, now) == now


def test_parallel_attempts_take_turns_and_too_many_are_refused() -> None:
    slowdown = Slowdown()
    for _ in range(50):
        slowdown.failed(PEER, 0.0)
    turns = []
    while (turn := slowdown.turn(PEER, 0.0)) is not None:
        turns.append(turn)
    # One a MAX_DELAY apart, as many as fit in the wait allowed.
    assert turns == [MAX_DELAY_SECONDS * (i + 1) for i in range(len(turns))]
    assert len(turns) == int(MAX_WAIT_SECONDS / MAX_DELAY_SECONDS)


def test_a_quiet_peer_is_forgotten_and_the_peers_kept_are_bounded() -> None:
    slowdown = Slowdown()
    slowdown.failed(PEER, 0.0)
    assert slowdown.turn(PEER, FORGET_SECONDS) == FORGET_SECONDS
    for index in range(MAX_PEERS + 10):
        slowdown.failed(f"198.51.100.{index}", 1.0)
    assert len(slowdown) == MAX_PEERS


def test_the_log_budget_takes_a_burst_then_one_per_interval() -> None:
    budget = LogBudget()
    assert [budget.take(0.0) for _ in range(LOG_BURST)] == [0] * LOG_BURST
    assert budget.take(0.0) is None
    assert budget.take(0.1) is None
    # A line that goes out says how many did not.
    assert budget.take(LOG_INTERVAL_SECONDS) == 2
    assert budget.take(LOG_INTERVAL_SECONDS) is None
