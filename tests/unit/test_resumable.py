"""Resumable records: a follower joining at any point sees each notification
once, as it was sent, then the result."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
import pytest

from bashrpc.protocol.methods import BashChunk, BashResult, PtyOutput
from bashrpc.server import errors
from bashrpc.server.runtime.run.ptylane import PtyLane
from bashrpc.server.services.bashcall import ON_PIPES, ON_PTY
from bashrpc.server.services.resumable import Resumable, Resumables

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


def chunk(seq: int, text: str) -> BashChunk:
    return BashChunk(request_id=1, session_id="default", seq=seq, text=text, skipped=0)


def add(record: Resumable, seq: int, text: str) -> None:
    """A `bash/chunk` the request sent (the record numbers them as the stream does)."""
    assert record.log.next_seq == seq
    record.sent("bash/chunk", chunk(seq, text))


class Got:
    """A follower's connection: what it was sent, as (seq, text)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    async def __call__(self, method: str, params: msgspec.Struct) -> None:
        if isinstance(params, BashChunk):
            assert method == "bash/chunk"
            self.sent.append((params.seq, params.text))
        else:
            assert method == "pty/output" and isinstance(params, PtyOutput)
            self.sent.append((params.seq, params.data))


@pytest.mark.parametrize("joined_at", range(len(TEXTS) + 1))
def test_a_follower_joining_at_any_chunk_gets_the_rest_once(joined_at: int) -> None:
    resumables = Resumables()
    first, second = Owner(), Owner()
    record = resumables.start(1, "bash", "default", first)

    async def main() -> tuple[list[tuple[int, str]], BashResult]:
        got = Got()

        async def send(method: str, params: msgspec.Struct) -> None:
            await got(method, params)
            await anyio.sleep(0)

        for seq in range(joined_at):
            add(record, seq, TEXTS[seq])
        resumables.cut(first)
        async with anyio.create_task_group() as tg:

            async def produce() -> None:
                for seq in range(joined_at, len(TEXTS)):
                    add(record, seq, TEXTS[seq])
                    await anyio.sleep(0)
                resumables.end(record, RESULT)

            tg.start_soon(produce)
            result = await resumables.follow(record, joined_at // 2 - 1, second, send)
        return got.sent, result

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
        send = Got()
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
    record = resumables.start(1, "bash", "default", gone, lane, ON_PTY)
    outputs = [PtyOutput(request_id=1, seq=seq, data=d) for seq, d in enumerate(["AAAA", "BBBB"])]
    record.log.max_bytes = 2 * len(msgspec.json.encode(outputs[0]))
    for output in [*outputs, PtyOutput(request_id=1, seq=2, data="CCCC")]:
        record.sent("pty/output", output)
    # A PTY request's record keeps its raw output alone.
    record.sent("bash/chunk", chunk(3, "not a PTY's"))
    assert record.log.next_seq == 3
    resumables.cut(gone)
    resumables.end(record, RESULT)

    async def main() -> list[tuple[int, str]]:
        got = Got()
        await resumables.follow(record, -1, back, got, accept_gap=True)
        return got.sent

    # Terminal bytes take no notice: the first seq sent says what is gone.
    assert anyio.run(main) == [(1, "BBBB"), (2, "CCCC")]


def test_a_replay_that_lost_its_start_is_refused_unless_the_gap_is_accepted() -> None:
    resumables = Resumables()
    gone, back = Owner(), Owner()
    record = resumables.start(1, "bash", "default", gone, logged=ON_PIPES)
    record.log.max_bytes = 2 * len(msgspec.json.encode(chunk(0, "AAAA")))
    for seq, data in enumerate(["AAAA", "BBBB", "CCCC"]):
        add(record, seq, data)
    resumables.cut(gone)
    resumables.end(record, RESULT)
    got = Got()
    sent: list[int] = []

    async def send(method: str, params: msgspec.Struct) -> None:
        await got(method, params)
        sent.append(got.sent[-1][0])

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
