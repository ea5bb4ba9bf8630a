"""A connection's phase (`wire.phase`): the table (pure), and what each phase admits."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from bashrpc.server.transitions import InvalidTransition, step
from bashrpc.server.wire.phase import PHASES, TRANSITIONS, Event, Phase, admits, advance


@pytest.mark.parametrize(
    ("events", "phase"),
    [
        ((), "open"),
        (("drain",), "draining"),
        (("drain", "drain"), "draining"),
        (("drain", "wind_down"), "winding_down"),
        (("wind_down",), "winding_down"),
        (("wind_down", "wind_down"), "winding_down"),
        # A drain asked of a connection winding down changes nothing.
        (("wind_down", "drain"), "winding_down"),
    ],
)
def test_a_connection_s_life_follows_the_table(events: tuple[Event, ...], phase: Phase) -> None:
    now: Phase = "open"
    for event in events:
        now = advance(now, event)
    assert now == phase


@pytest.mark.parametrize(("phase", "event"), list(itertools.product(PHASES, get_args(Event))))
def test_every_pair_moves_by_the_table_or_is_refused(phase: Phase, event: Event) -> None:
    if (phase, event) in TRANSITIONS:
        assert advance(phase, event) == TRANSITIONS[phase, event]
    else:
        with pytest.raises(InvalidTransition):
            step(TRANSITIONS, phase, event)


def test_no_phase_goes_back_to_open() -> None:
    assert all(after != "open" for after in TRANSITIONS.values())


@pytest.mark.parametrize(
    ("phase", "lifecycle", "command", "admitted"),
    [
        ("open", False, False, True),
        ("open", False, True, True),
        ("open", True, False, True),
        ("draining", False, False, True),
        ("draining", False, True, False),
        ("draining", True, False, True),
        ("winding_down", False, False, False),
        ("winding_down", False, True, False),
        ("winding_down", True, False, True),
    ],
)
def test_what_each_phase_admits(
    phase: Phase, lifecycle: bool, command: bool, admitted: bool
) -> None:
    assert admits(phase, lifecycle=lifecycle, command=command) is admitted
