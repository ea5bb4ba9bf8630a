"""A request's states in flight, all moved by `Flights`: the table (pure), then
the flights it moves, cancelled before, during and after their start."""

from __future__ import annotations

import itertools
from typing import get_args

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from bashrpc.server import errors
from bashrpc.server.transitions import InvalidTransition, step
from bashrpc.server.wire.inflight import STATES, TRANSITIONS, Event, Flights, State


def walk(*events: Event) -> State:
    state: State = "admitted"
    for event in events:
        state = step(TRANSITIONS, state, event)
    return state


@pytest.mark.parametrize(
    ("events", "state"),
    [
        (("start", "release"), "finished"),
        (("cancel", "start", "release"), "finished"),
        (("cancel",), "marked"),
        (("cancel", "start"), "cancelled"),
        (("start", "cancel"), "cancelled"),
        (("start", "cancel", "cancel"), "cancelled"),
        # Refused by its method's admission check: released unstarted.
        (("release",), "finished"),
        (("release", "cancel"), "finished"),
    ],
)
def test_a_request_s_life_follows_the_table(events: tuple[Event, ...], state: State) -> None:
    assert walk(*events) == state


@pytest.mark.parametrize(("state", "event"), list(itertools.product(STATES, get_args(Event))))
def test_every_pair_moves_by_the_table_or_is_refused(state: State, event: Event) -> None:
    if (state, event) in TRANSITIONS:
        assert step(TRANSITIONS, state, event) == TRANSITIONS[state, event]
    else:
        with pytest.raises(InvalidTransition, match=f"{event} in {state}"):
            step(TRANSITIONS, state, event)


def test_a_request_starts_once_and_ends_once() -> None:
    for state in ("running", "cancelled", "finished"):
        with pytest.raises(InvalidTransition):
            step(TRANSITIONS, state, "start")
    with pytest.raises(InvalidTransition):
        step(TRANSITIONS, "finished", "release")


def test_the_flags_are_read_off_the_state() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit(1)
        assert (flight.state, flight.cancelled, flight.started) == ("admitted", False, False)
        flights.cancel(1)
        assert (flight.state, flight.cancelled, flight.started) == ("marked", True, False)
        with flights.start(flight):
            assert (flight.state, flight.cancelled, flight.started) == ("cancelled", True, True)
        flights.release(flight)
        assert flight.finished and flight.state == "finished"

    anyio.run(main)


def test_a_cancel_before_the_start_only_marks_the_flight() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit(1)
        assert flights.cancel(1) is True
        assert flight.cancelled and not flight.started
        assert not flight.scope.cancel_called

    anyio.run(main)


def test_a_cancel_after_the_start_cancels_the_task() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit("a")
        with anyio.fail_after(5), flights.start(flight):
            assert flight.started
            assert flights.cancel("a") is True
            await anyio.sleep(10)
        assert flight.scope.cancelled_caught

    anyio.run(main)


def test_a_request_that_runs_no_command_cancelled_before_its_start_is_cancelled_at_it() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit(1)
        flights.cancel(1)
        with anyio.fail_after(5), flights.start(flight):
            await anyio.sleep(10)
        assert flight.scope.cancelled_caught

    anyio.run(main)


def test_the_handler_of_a_request_cancelled_before_its_start_never_runs() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit(1)
        flights.cancel(1)
        ran: list[int] = []

        async def handler(value: int) -> None:
            ran.append(value)  # before any checkpoint: a late cancel would not stop this

        with flights.start(flight):
            await flight.run(handler, 1)
        assert ran == [] and flight.scope.cancelled_caught

    anyio.run(main)


def test_a_cancel_after_the_release_finds_nothing_and_the_flights_are_idle() -> None:
    async def main() -> None:
        flights = Flights(1)
        flight = flights.admit(1)
        with pytest.raises(errors.ServerBusy):
            flights.admit(2)
        with flights.start(flight):
            pass
        flights.release(flight)
        assert flight.finished and flights.cancel(1) is False
        with anyio.fail_after(5):
            await flights.wait_idle()
        flights.admit(2)

    anyio.run(main)


def test_a_wait_for_idle_ends_with_the_last_request_of_its_busy_spell() -> None:
    async def main() -> None:
        flights = Flights(4)
        first, second = flights.admit(1), flights.admit(2)
        woke: list[str] = []

        async def waiter() -> None:
            await flights.wait_idle()
            woke.append("idle")

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await wait_all_tasks_blocked()
                flights.release(first)
                await wait_all_tasks_blocked()
                assert woke == []
                flights.release(second)
        assert woke == ["idle"]
        # The next busy spell is waited for anew.
        third = flights.admit(3)
        with anyio.move_on_after(0.05) as still_busy:
            await flights.wait_idle()
        assert still_busy.cancelled_caught
        flights.release(third)
        with anyio.fail_after(5):
            await flights.wait_idle()

    anyio.run(main)


def test_a_command_attached_after_a_cancel_is_aborted_and_its_task_goes_on() -> None:
    async def main() -> None:
        flights = Flights(4)
        flight = flights.admit(1, runs_command=True)
        flights.cancel(1)
        aborted: list[bool] = []

        def abort() -> bool:
            aborted.append(True)
            return True

        with flights.start(flight):
            flight.attach(abort)
            await anyio.sleep(0)
        # Aborted gracefully: the reply then says cancelled, from the handler.
        assert aborted == [True] and not flight.scope.cancelled_caught

    anyio.run(main)
