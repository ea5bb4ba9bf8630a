"""A connection's phase and the moves between them: pure, one table.

    open --drain--> draining --wind_down--> winding_down
      |                                         ^
      +-----------------wind_down---------------+

- open: every request is admitted.
- draining: no new command (nor job); the running ones have a while to finish.
- winding_down: nothing but `shutdown` and `exit` is admitted; everything running
  is aborted and every process killed.

Each move may come again (a second SIGTERM, `shutdown` then EOF); a drain
asked of a connection winding down changes nothing. Whether the client closed
the input is not a phase: it may happen in any of them, and only decides what
an MCP request still answers.
"""

from __future__ import annotations

from typing import Literal, get_args

from bashrpc.server.transitions import step

Phase = Literal["open", "draining", "winding_down"]
Event = Literal["drain", "wind_down"]
PHASES: tuple[Phase, ...] = get_args(Phase)

TRANSITIONS: dict[tuple[Phase, Event], Phase] = {
    ("open", "drain"): "draining",
    ("open", "wind_down"): "winding_down",
    ("draining", "drain"): "draining",
    ("draining", "wind_down"): "winding_down",
    ("winding_down", "drain"): "winding_down",
    ("winding_down", "wind_down"): "winding_down",
}


def advance(phase: Phase, event: Event) -> Phase:
    return step(TRANSITIONS, phase, event)


def admits(phase: Phase, *, lifecycle: bool, command: bool) -> bool:
    """Whether a request is admitted in `phase`: `lifecycle` for `shutdown` and
    `exit`, `command` for what starts a command."""
    if phase == "winding_down":
        return lifecycle
    return not (phase == "draining" and command)
