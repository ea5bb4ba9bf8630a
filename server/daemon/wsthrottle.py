"""Refusals at the WebSocket listener: wrong tokens slowed per peer, and the log
kept within a budget; pure, tested without a clock.

A peer (an IP address) that presented a wrong token, or none, waits before
its next attempt is checked: `FIRST_DELAY_SECONDS` after its first failure,
doubling with each one since, up to `MAX_DELAY_SECONDS`. Attempts take
turns: each reserves its peer's next free time, so parallel connections
guess no faster than one after another. An attempt whose turn is more than
`MAX_WAIT_SECONDS` away is refused at once (429) without a check. A peer
with no failure for `FORGET_SECONDS` starts afresh; at most `MAX_PEERS` are
remembered, the one that failed least recently forgotten first.

Refusals are logged within a budget: `LOG_BURST` lines at once, then one per
`LOG_INTERVAL_SECONDS`; a line that is logged says how many were left out
before it. So 1,500 guesses a second cost neither CPU in checks nor the log.
"""

from __future__ import annotations

FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 1.0
# Below the handshake's own timeout (10 s): a connection refused at once
# holds nothing, one that waits holds a socket.
MAX_WAIT_SECONDS = 5.0
FORGET_SECONDS = 60.0
MAX_PEERS = 4096
LOG_BURST = 5
LOG_INTERVAL_SECONDS = 10.0


def delay(failures: int) -> float:
    """How long a peer with this many recent failures waits between attempts."""
    if failures <= 0:
        return 0.0
    return min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2.0 ** min(failures - 1, 32))


class _Peer:
    def __init__(self) -> None:
        self.failures = 0
        self.last_failure = 0.0
        self.next_turn = 0.0


class Slowdown:
    def __init__(self) -> None:
        self._peers: dict[str, _Peer] = {}

    def turn(self, peer: str, now: float) -> float | None:
        """When this attempt of `peer` may be checked (the turn is reserved);
        None: too many wait already, refuse it now."""
        record = self._peers.get(peer)
        forgotten = record is not None and now - record.last_failure >= FORGET_SECONDS
        if record is not None and forgotten and record.next_turn <= now:
            del self._peers[peer]
            record = None
        if record is None:
            return now
        start = max(now, record.next_turn) + delay(record.failures)
        if start - now > MAX_WAIT_SECONDS:
            return None
        record.next_turn = start
        return start

    def failed(self, peer: str, now: float) -> None:
        record = self._peers.pop(peer, None) or _Peer()
        record.failures += 1
        record.last_failure = now
        self._peers[peer] = record  # the most recent failure last
        while len(self._peers) > MAX_PEERS:
            del self._peers[next(iter(self._peers))]

    def __len__(self) -> int:
        return len(self._peers)


class LogBudget:
    """A token bucket for log lines: `take` says whether a line may go out."""

    def __init__(self, burst: int = LOG_BURST, interval: float = LOG_INTERVAL_SECONDS) -> None:
        self._burst = burst
        self._interval = interval
        self._tokens = float(burst)
        self._at: float | None = None
        self._left_out = 0

    def take(self, now: float) -> int | None:
        """None: leave this line out; else how many lines were left out before it."""
        if self._at is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._at) / self._interval)
        self._at = now
        if self._tokens < 1:
            self._left_out += 1
            return None
        self._tokens -= 1
        left_out, self._left_out = self._left_out, 0
        return left_out
