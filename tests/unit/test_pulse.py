"""Pulse: a fire wakes every task waiting then, and none that waits after it."""

from __future__ import annotations

import anyio

from bashrpc.server.pulse import Pulse

# Generous: only a hang could take this long.
HANG_SECONDS = 10.0


def test_a_fire_wakes_every_waiter() -> None:
    woken: list[int] = []

    async def waiter(pulse: Pulse, n: int, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        await pulse.wait()
        woken.append(n)

    async def main() -> None:
        pulse = Pulse()
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    await tg.start(waiter, pulse, n)
                pulse.fire()

    anyio.run(main)
    assert sorted(woken) == [0, 1, 2]


def test_a_wait_after_a_fire_waits_for_the_next() -> None:
    async def main() -> bool:
        pulse = Pulse()
        pulse.fire()
        with anyio.move_on_after(0.05) as before:
            await pulse.wait()
        # ... and the next fire ends it (a hang would fail here).
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                tg.start_soon(pulse.wait)
                await anyio.wait_all_tasks_blocked()
                pulse.fire()
        return before.cancelled_caught

    assert anyio.run(main)
