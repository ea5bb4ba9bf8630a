"""The request workers: a request handed to a task waiting for one, a new task
only when none waits, and no more than `keep` left waiting."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import pytest
from anyio import wait_all_tasks_blocked

from bashrpc.server.wire.workers import Workers

HANG_SECONDS = 5


class Recorder:
    """What the requests saw: the task each ran in, in order."""

    def __init__(self) -> None:
        self.tasks: list[int] = []

    async def run(self, gate: anyio.Event | None = None) -> None:
        self.tasks.append(anyio.get_current_task().id)
        if gate is not None:
            await gate.wait()


def test_requests_one_after_another_run_in_one_task() -> None:
    async def main() -> tuple[list[int], int]:
        seen = Recorder()
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                workers = Workers(tg)
                for _ in range(3):
                    workers.start_soon(seen.run)
                    await wait_all_tasks_blocked()
                idle = workers.idle
                tg.cancel_scope.cancel()
        return seen.tasks, idle

    tasks, idle = anyio.run(main)
    assert len(tasks) == 3 and len(set(tasks)) == 1
    assert idle == 1


def test_requests_at_once_each_get_a_task_and_run_together() -> None:
    async def main() -> list[int]:
        seen, gate = Recorder(), anyio.Event()
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                workers = Workers(tg)
                for _ in range(3):
                    workers.start_soon(seen.run, gate)
                await wait_all_tasks_blocked()
                # All three started before any could finish: none waits for another.
                assert len(seen.tasks) == 3
                gate.set()
                await wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
        return seen.tasks

    assert len(set(anyio.run(main))) == 3


@pytest.mark.parametrize("keep", [0, 1, 4])
def test_no_more_than_keep_wait_after_a_burst(keep: int) -> None:
    async def main() -> int:
        seen, gate = Recorder(), anyio.Event()
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                workers = Workers(tg, keep=keep)
                for _ in range(keep + 3):
                    workers.start_soon(seen.run, gate)
                await wait_all_tasks_blocked()
                gate.set()
                await wait_all_tasks_blocked()
                idle = workers.idle
                tg.cancel_scope.cancel()
        return idle

    assert anyio.run(main) == keep


@contextlib.asynccontextmanager
async def one_waiting() -> AsyncIterator[tuple[anyio.abc.TaskGroup, Workers]]:
    """A group whose one worker has run a request and waits for the next."""
    with anyio.fail_after(HANG_SECONDS):
        async with anyio.create_task_group() as tg:
            workers = Workers(tg)
            workers.start_soon(Recorder().run)
            await wait_all_tasks_blocked()
            assert workers.idle == 1
            yield tg, workers


def test_the_group_s_end_ends_the_waiting_workers() -> None:
    async def main() -> int:
        async with one_waiting() as (tg, workers):
            tg.cancel_scope.cancel()
        return workers.idle

    assert anyio.run(main) == 0


def test_a_request_given_as_the_group_is_cancelled_still_runs_its_cleanup() -> None:
    """As a task spawned for it would: up to its first checkpoint, then cancelled,
    so what its `finally` releases (its flight) is released."""
    released: list[str] = []

    async def request() -> None:
        try:
            await anyio.sleep(HANG_SECONDS)
        finally:
            released.append("flight")

    async def main() -> None:
        async with one_waiting() as (tg, workers):
            # The group is cancelled, and the waiting worker given a request
            # before it wakes to the cancellation.
            tg.cancel_scope.cancel()
            workers.start_soon(request)

    anyio.run(main)
    assert released == ["flight"]


def test_a_request_s_error_reaches_the_group_as_a_spawned_task_s_would() -> None:
    async def failing() -> None:
        raise ValueError("a bug")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            Workers(tg).start_soon(failing)

    with pytest.raises(ExceptionGroup) as caught:
        anyio.run(main)
    assert caught.group_contains(ValueError, match="a bug")


def test_a_waiting_worker_holds_nothing_of_the_request_it_ran() -> None:
    class Payload:
        pass

    async def use(payload: Payload) -> None:
        assert isinstance(payload, Payload)

    async def main() -> tuple[bool, int]:
        with anyio.fail_after(HANG_SECONDS):
            async with anyio.create_task_group() as tg:
                workers = Workers(tg)
                payload = Payload()
                ref = weakref.ref(payload)
                workers.start_soon(use, payload)
                del payload
                await wait_all_tasks_blocked()
                gc.collect()
                freed = ref() is None
                idle = workers.idle
                tg.cancel_scope.cancel()
        return freed, idle

    assert anyio.run(main) == (True, 1)
