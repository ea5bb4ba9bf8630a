"""Deadlines: every running command's timeout under one timer of the loop.

Real loops and real timers; the deadlines are short, and each wait is bounded
generously, so a deadline that never comes fails rather than hangs.
"""

from __future__ import annotations

import anyio

from bashrpc.server import clock
from bashrpc.server.runtime.run.deadlines import Deadlines

# Generous: only a hang could take this long.
HANG_SECONDS = 10.0
SOON = 0.05


# When each command was due, by name.
Dues = dict[str, float]


async def _run_until_cancelled(
    deadlines: Deadlines,
    timeout: float,
    ended: dict[str, float],
    name: str,
    dues: Dues | None = None,
) -> None:
    """A command's scope with its timeout kept by `deadlines`; when it ended."""
    with anyio.CancelScope() as scope:
        due = clock.now() + timeout
        if dues is not None:
            dues[name] = due
        deadlines.add(scope, due)
        try:
            await anyio.sleep(HANG_SECONDS)
        finally:
            deadlines.discard(scope)
    ended[name] = clock.now()
    assert scope.cancelled_caught, name


def test_a_scope_is_cancelled_at_its_deadline() -> None:
    async def main() -> tuple[float, float, int]:
        deadlines = Deadlines()
        ended: dict[str, float] = {}
        start = clock.now()
        with anyio.fail_after(HANG_SECONDS):
            await _run_until_cancelled(deadlines, SOON, ended, "one")
        return start, ended["one"], len(deadlines)

    start, end, left = anyio.run(main)
    assert end - start >= SOON
    assert left == 0


def test_deadlines_come_in_their_order_whatever_order_they_were_added_in() -> None:
    async def main() -> dict[str, float]:
        deadlines = Deadlines()
        ended: dict[str, float] = {}
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(_run_until_cancelled, deadlines, 3 * SOON, ended, "late")
                group.start_soon(_run_until_cancelled, deadlines, SOON, ended, "early")
                group.start_soon(_run_until_cancelled, deadlines, 2 * SOON, ended, "middle")
        return ended

    ended = anyio.run(main)
    assert sorted(ended, key=ended.__getitem__) == ["early", "middle", "late"]


def test_a_discarded_scope_is_never_cancelled_and_the_others_still_are() -> None:
    async def main() -> tuple[bool, dict[str, float]]:
        deadlines = Deadlines()
        ended: dict[str, float] = {}
        with anyio.fail_after(HANG_SECONDS):
            with anyio.CancelScope() as kept:
                deadlines.add(kept, clock.now() + SOON)
                # It ends before its deadline, as most commands do.
                deadlines.discard(kept)
                async with anyio.create_task_group() as group:
                    group.start_soon(_run_until_cancelled, deadlines, 2 * SOON, ended, "other")
                # Past the discarded one's deadline and the other's.
                await anyio.sleep(3 * SOON)
        return kept.cancel_called, ended

    cancelled, ended = anyio.run(main)
    assert not cancelled
    assert list(ended) == ["other"]


def test_a_later_deadline_keeps_the_armed_timer_and_the_timer_rearms_after_firing() -> None:
    """A steady stream of alike timeouts arms the loop's timer about once per
    timeout: a later deadline does not re-arm it, and once it fired for a
    command already gone, it arms itself for the one still running."""

    async def main() -> tuple[float, float, float, float, dict[str, float]]:
        deadlines = Deadlines()
        ended: dict[str, float] = {}
        dues: Dues = {}
        with anyio.fail_after(HANG_SECONDS):
            with anyio.CancelScope() as first:
                first_due = clock.now() + SOON
                deadlines.add(first, first_due)
            deadlines.discard(first)
            async with anyio.create_task_group() as group:
                group.start_soon(_run_until_cancelled, deadlines, 3 * SOON, ended, "second", dues)
                await anyio.sleep(0)
                armed_then = deadlines.armed_for
                await anyio.sleep(2 * SOON)
                # The first's timer fired with nothing due, and armed for the second.
                armed_after = deadlines.armed_for
                second_due = dues["second"]
        return first_due, armed_then, second_due, armed_after, ended

    first_due, armed_then, second_due, armed_after, ended = anyio.run(main)
    assert armed_then == first_due
    assert armed_after == second_due
    assert list(ended) == ["second"]
