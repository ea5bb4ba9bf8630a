"""One step of a pure state table, the shape every life here is written in (a
request in flight, a connection, a background job, a command on its shell): the
table is a dict from (state, event) to the next state, and an event a state
does not take is a bug in the caller, said as such."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

S = TypeVar("S", bound=str)
E = TypeVar("E", bound=str)


class InvalidTransition(RuntimeError):
    """An event the table does not allow in that state."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"{event} in {state}")
        self.state = state
        self.event = event


def step(table: Mapping[tuple[S, E], S], state: S, event: E) -> S:
    """The state after `event`: a dict lookup, no more."""
    try:
        return table[state, event]
    except KeyError:
        raise InvalidTransition(state, event) from None
