"""Tightening the sandbox (`services.tightening.plan`, pure): which sessions a
mode puts under it, and the refusal that comes before anything changes."""

from __future__ import annotations

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import SandboxMode
from bashrpc.server import errors
from bashrpc.server.services.tightening import plan

MODES: dict[str, SandboxMode] = {
    "open": "off",
    "full": "full",
    "writes": "workspace-write",
    "reads": "read-only",
}


@pytest.mark.parametrize(
    ("mode", "chosen"),
    [
        ("off", []),
        ("full", ["open"]),
        ("workspace-write", ["open", "full"]),
        ("read-only", ["open", "full", "writes"]),
    ],
)
def test_a_mode_takes_only_the_sessions_looser_than_it(
    mode: SandboxMode, chosen: list[str]
) -> None:
    assert plan(MODES, mode, busy=()) == chosen


def test_a_busy_session_already_as_strict_is_left_alone() -> None:
    assert plan(MODES, "workspace-write", busy={"writes", "reads"}) == ["open", "full"]


def test_a_busy_session_it_would_change_refuses_the_whole_plan() -> None:
    with pytest.raises(errors.InvalidArgument) as refused:
        plan(MODES, "read-only", busy={"full"})
    assert refused.value.detail == messages.SANDBOX_TIGHTEN_BUSY.format(
        session="full", mode="read-only"
    )
