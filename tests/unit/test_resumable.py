"""Resumable records: a follower joining at any point sees each chunk once, then the result."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from bashrpc.protocol.methods import BashResult
from bashrpc.server import errors
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.services.resumable import Resumables

RESULT = BashResult(
    output="",
    exit_code=0,
    cancelled=False,
    timed_out=False,
    truncated=False,
    total_lines=0,
    total_bytes=0,
    output_lines=0,
    output_bytes=0,
    working_dir=None,
)
TEXTS = [f"{n}\n" for n in range(20)]


class Owner:
    """A connection, as the records know it: an identity."""


@pytest.mark.parametrize("joined_at", range(len(TEXTS) + 1))
def test_a_follower_joining_at_any_chunk_gets_the_rest_once(joined_at: int) -> None:
    resumables = Resumables()
    first, second = Owner(), Owner()
    record = resumables.start(1, "bash", "default", first)

    async def main() -> tuple[list[tuple[int, str]], BashResult]:
        got: list[tuple[int, str]] = []

        async def send(seq: int, text: str, skipped: int) -> None:
            got.append((seq, text))
            await anyio.sleep(0)

        for seq in range(joined_at):
            record.add(seq, TEXTS[seq], 0)
        resumables.cut(first)
        async with anyio.create_task_group() as tg:

            async def produce() -> None:
                for seq in range(joined_at, len(TEXTS)):
                    record.add(seq, TEXTS[seq], 0)
                    await anyio.sleep(0)
                resumables.end(record, RESULT)

            tg.start_soon(produce)
            result = await resumables.follow(record, joined_at // 2 - 1, second, send)
        return got, result

    got, result = anyio.run(main)
    start = max(0, joined_at // 2)
    assert got == [(seq, TEXTS[seq]) for seq in range(start, len(TEXTS))]
    assert result is RESULT
    # Delivered: the id is free again.
    assert resumables.records == {}


def test_a_record_ended_on_a_live_connection_is_not_kept() -> None:
    resumables = Resumables()
    record = resumables.start(1, "bash", "default", Owner())
    resumables.end(record, RESULT)
    assert resumables.records == {}


def test_an_id_still_held_is_not_taken_by_a_new_request() -> None:
    resumables = Resumables()
    gone, new = Owner(), Owner()
    held = resumables.start(1, "bash", "default", gone)
    resumables.cut(gone)
    again = resumables.start(1, "bash", "default", new)
    assert resumables.find(1) is held
    resumables.end(again, RESULT)
    assert resumables.find(1) is held


def test_an_abort_reaches_only_a_running_request_of_a_cut_connection() -> None:
    resumables = Resumables()
    live, gone = Owner(), Owner()
    cancelled: list[int] = []

    def canceller(request_id: int) -> Callable[[], bool]:
        def cancel() -> bool:
            cancelled.append(request_id)
            return True

        return cancel

    for request_id, owner in ((1, live), (2, gone), (3, gone)):
        record = resumables.start(request_id, "bash", "default", owner)
        record.cancel = canceller(request_id)
    resumables.cut(gone)
    resumables.end(resumables.find(3), RESULT)
    assert [resumables.abort(n) for n in (1, 2, 3, 4)] == [False, True, False, False]
    assert cancelled == [2]


def test_a_follow_on_a_connection_cut_in_turn_stops_and_keeps_the_record() -> None:
    resumables = Resumables()
    first, second = Owner(), Owner()
    record = resumables.start(1, "bash", "default", first)
    resumables.cut(first)

    async def main() -> None:
        async def send(seq: int, text: str, skipped: int) -> None:
            pass

        async with anyio.create_task_group() as tg:

            async def cut_soon() -> None:
                await anyio.sleep(0)
                resumables.cut(second)

            tg.start_soon(cut_soon)
            with pytest.raises(errors.RequestCancelled):
                await resumables.follow(record, -1, second, send)

    anyio.run(main)
    assert resumables.find(1) is record


def test_an_unknown_id_is_invalid() -> None:
    with pytest.raises(errors.InvalidArgument):
        Resumables().find(5)


def test_a_pty_replay_that_lost_its_start_is_sent_as_kept_without_a_notice() -> None:
    resumables = Resumables()
    gone, back = Owner(), Owner()
    lane = PtyLane(1, 80, 24, lambda _lane: None)
    record = resumables.start(1, "bash", "default", gone, lane)
    record.log.max_bytes = 8
    for seq, data in enumerate(["AAAA", "BBBB", "CCCC"]):
        record.add(seq, data, 0)
    resumables.cut(gone)
    resumables.end(record, RESULT)

    async def main() -> list[tuple[int, str]]:
        got: list[tuple[int, str]] = []

        async def send(seq: int, text: str, skipped: int) -> None:
            got.append((seq, text))

        await resumables.follow(record, -1, back, send, accept_gap=True)
        return got

    # Terminal bytes take no notice: the first seq sent says what is gone.
    assert anyio.run(main) == [(1, "BBBB"), (2, "CCCC")]


def test_a_replay_that_lost_its_start_is_refused_unless_the_gap_is_accepted() -> None:
    resumables = Resumables()
    gone, back = Owner(), Owner()
    record = resumables.start(1, "bash", "default", gone)
    record.log.max_bytes = 8
    for seq, data in enumerate(["AAAA", "BBBB", "CCCC"]):
        record.add(seq, data, 0)
    resumables.cut(gone)
    resumables.end(record, RESULT)
    sent: list[int] = []

    async def send(seq: int, text: str, skipped: int) -> None:
        sent.append(seq)

    with pytest.raises(errors.ResumeGap) as refused:
        anyio.run(resumables.follow, record, -1, back, send)
    assert (refused.value.first_kept, refused.value.missed) == (1, 1)
    # Nothing was sent, and the record is still there to attach to.
    assert sent == [] and resumables.find(1) is record
    # From what is kept, no gap: it resumes exactly.
    assert anyio.run(resumables.follow, record, 0, back, send) is RESULT
    assert sent == [1, 2]


def test_a_pty_lane_is_reachable_through_its_record_while_it_is_open() -> None:
    resumables = Resumables()
    lane = PtyLane(1, 80, 24, lambda _lane: None)
    record = resumables.start(1, "bash", "default", Owner(), lane)
    assert record.pty and resumables.lane(1) is lane
    assert resumables.lane(2) is None
    lane.close()
    assert resumables.lane(1) is None
    piped = Resumables()
    assert not piped.start(1, "bash", "default", Owner()).pty
    assert piped.lane(1) is None
