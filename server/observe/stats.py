"""The process's figures: counters bumped where things happen (pure).

A command's start and end, a kill, a resume and an rc capture are counted by
the code that sees them. What is alive now (connections, tenants, sessions,
shells, bytes held for resumes) is not counted but read from the live objects
when asked (`Gauges`), so it cannot drift. Every label is a fixed word: no id,
command or path ever becomes one, so the series stay bounded however many
commands run.

One `Stats` per process (`STATS`), as a scrape sees the process.
"""

from __future__ import annotations

import bisect
from typing import Literal, get_args

import msgspec

from bashrpc.protocol.methods import (
    CommandsFinished,
    DurationHistogram,
    Kills,
    NetworkBytes,
    NetworkConnections,
    Resumes,
    ServerStatsResult,
)
from bashrpc.server import log

CommandOutcome = Literal["ok", "failed", "cancelled", "timed_out", "sandbox_denied"]
KillReason = Literal["timeout", "cancel", "reset"]
OUTCOMES: tuple[CommandOutcome, ...] = get_args(CommandOutcome)
KILL_REASONS: tuple[KillReason, ...] = get_args(KillReason)
# Seconds: from a `true` (well under 5 ms) to the longest timeout allowed (an hour).
DURATION_BOUNDS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DURATION_BOUNDS += (30.0, 60.0, 300.0, 3600.0)


class Gauges(msgspec.Struct, frozen=True, kw_only=True):
    """What is alive now, read off the live objects by whoever owns them."""

    connections: int
    tenants: int
    sessions: int
    shells: int
    commands_running: int
    commands_queued: int
    jobs: int
    replay_bytes: int


class Stats:
    def __init__(self) -> None:
        self.commands_started = 0
        self.finished: dict[CommandOutcome, int] = dict.fromkeys(OUTCOMES, 0)
        self.kills: dict[KillReason, int] = dict.fromkeys(KILL_REASONS, 0)
        # Per bucket, not cumulative: bucket i holds durations in (bound i-1, bound i];
        # the last one, past every bound.
        self._buckets = [0] * (len(DURATION_BOUNDS) + 1)
        self._seconds = 0.0
        self.output_bytes = 0
        self.resumes_ok = 0
        self.resumes_gap = 0
        self.rc_capture_failures = 0
        # The last rc capture failed: not ready until one succeeds again.
        self.rc_capture_failing = False
        self.network = {True: 0, False: 0}
        self.network_sent = 0
        self.network_received = 0

    def started(self) -> None:
        self.commands_started += 1

    def finished_as(self, outcome: CommandOutcome, seconds: float, output_bytes: int) -> None:
        self.finished[outcome] += 1
        self._buckets[bisect.bisect_left(DURATION_BOUNDS, seconds)] += 1
        self._seconds += seconds
        self.output_bytes += output_bytes
        if outcome == "timed_out":
            self.kills["timeout"] += 1
        elif outcome == "cancelled":
            self.kills["cancel"] += 1

    def killed(self, reason: KillReason, count: int = 1) -> None:
        self.kills[reason] += count

    def resumed(self, *, gap: bool) -> None:
        if gap:
            self.resumes_gap += 1
        else:
            self.resumes_ok += 1

    def rc_captured(self, *, ok: bool) -> None:
        self.rc_capture_failing = not ok
        if not ok:
            self.rc_capture_failures += 1

    def network_connection(self, *, allowed: bool, sent: int, received: int) -> None:
        """One connection through a sandbox's allowlist proxy, as it ended."""
        self.network[allowed] += 1
        self.network_sent += sent
        self.network_received += received

    def histogram(self) -> DurationHistogram:
        cumulative, total = [], 0
        for count in self._buckets[:-1]:
            total += count
            cumulative.append(total)
        return DurationHistogram(
            bounds=list(DURATION_BOUNDS),
            counts=cumulative,
            count=total + self._buckets[-1],
            sum=self._seconds,
        )

    def figures(self, gauges: Gauges) -> ServerStatsResult:
        return ServerStatsResult(
            connections=gauges.connections,
            tenants=gauges.tenants,
            sessions=gauges.sessions,
            shells=gauges.shells,
            commands_started=self.commands_started,
            commands_running=gauges.commands_running,
            commands_queued=gauges.commands_queued,
            jobs=gauges.jobs,
            commands_finished=CommandsFinished(**self.finished),
            command_seconds=self.histogram(),
            output_bytes=self.output_bytes,
            kills=Kills(**self.kills),
            resumes=Resumes(ok=self.resumes_ok, gap=self.resumes_gap),
            replay_bytes=gauges.replay_bytes,
            rc_capture_failures=self.rc_capture_failures,
            log_lines_dropped=log.dropped(),
            network_connections=NetworkConnections(
                allowed=self.network[True], refused=self.network[False]
            ),
            network_bytes=NetworkBytes(sent=self.network_sent, received=self.network_received),
        )


STATS = Stats()
