"""What the daemon's HTTP probes answer (`bashrpc daemon --http`): JSON bodies
that a kubelet ignores and a person reads. No field ever carries an id, a
command, a path or a credential."""

from __future__ import annotations

from typing import Literal

import msgspec

# Why the daemon is not ready: one word each, for alerts; the message says it in words.
NotReadyCode = Literal["draining", "sandbox", "rc_capture"]


class NotReady(msgspec.Struct, frozen=True):
    code: NotReadyCode
    message: str


class Readiness(msgspec.Struct, frozen=True):
    ready: bool
    reasons: list[NotReady]


class Liveness(msgspec.Struct, frozen=True):
    live: bool


class HttpProblem(msgspec.Struct, frozen=True):
    error: str
