"""The daemon's budget for requests kept for a resume, across tenants: pure accounting."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.server import errors
from bashrpc.server.output.keptbudget import KeptBudget, RecordCount
from bashrpc.server.services.bashcall import ON_PIPES
from bashrpc.server.services.resumable import Resumable, Resumables
from tests.unit.test_resumable import RESULT, Got, Owner, add, chunk

CHUNK = "x" * 1000
# What one chunk holds (seqs below 10: one digit), and room for ten.
SIZE = len(msgspec.json.encode(chunk(0, CHUNK)))
BUDGET = 10 * SIZE


def _filled(resumables: Resumables, request_id: int, owner: Owner, chunks: int) -> Resumable:
    record = resumables.start(request_id, "bash", "default", owner, logged=ON_PIPES)
    for seq in range(chunks):
        add(record, seq, CHUNK)
    return record


def _replayed(resumables: Resumables, record: Resumable) -> list[tuple[int, str]]:
    async def main() -> list[tuple[int, str]]:
        got = Got()
        await resumables.follow(record, -1, Owner(), got, accept_gap=True)
        return got.sent

    return anyio.run(main)


def test_the_budget_counts_every_kept_byte_and_frees_them_on_drop() -> None:
    budget = KeptBudget(BUDGET)
    resumables = Resumables(budget)
    owner = Owner()
    record = _filled(resumables, 1, owner, 3)
    assert budget.used == 3 * SIZE
    resumables.cut(owner)
    resumables.end(record, RESULT)
    assert budget.used == 3 * SIZE + len(msgspec.json.encode(RESULT))
    resumables.drop(record)
    assert budget.used == 0


def test_cut_records_give_way_oldest_first_and_attached_ones_never() -> None:
    budget = KeptBudget(BUDGET)
    alice, bob = Resumables(budget), Resumables(budget)
    gone, there = Owner(), Owner()
    oldest = _filled(alice, 1, gone, 4)
    alice.cut(gone)
    newer = _filled(bob, 1, gone, 4)
    bob.cut(gone)
    attached = _filled(alice, 2, there, 4)
    # 12 chunks against room for 10: the oldest cut record gives two.
    assert budget.used <= BUDGET
    assert oldest.log.first_kept == 2
    assert newer.log.first_kept == 0
    assert attached.log.first_kept == 0
    # More: the oldest gives all but its newest chunk, then the next one gives.
    for seq in range(4, 8):
        add(attached, seq, CHUNK)
    assert budget.used <= BUDGET
    assert oldest.log.first_kept == 3
    assert newer.log.first_kept > 0
    assert attached.log.first_kept == 0


def _cut_then_crowded(chunks: int, crowd: int) -> tuple[Resumables, Resumable]:
    """A finished record of a cut client, then `crowd` chunks of a request attached
    elsewhere: the cut one gives way."""
    budget = KeptBudget(BUDGET)
    resumables = Resumables(budget)
    gone = Owner()
    record = _filled(resumables, 1, gone, chunks)
    resumables.cut(gone)
    resumables.end(record, RESULT)
    _filled(Resumables(budget), 1, Owner(), crowd)
    assert budget.used <= BUDGET
    return resumables, record


def test_a_resume_from_before_what_is_kept_is_told_of_the_gap() -> None:
    resumables, record = _cut_then_crowded(5, 9)
    got = _replayed(resumables, record)
    assert [seq for seq, _ in got] == [4]
    notice = messages.NOTICE_RESUME_MISSED.format(count=4)
    assert got[0][1] == notice + CHUNK


def test_finished_cut_records_are_dropped_when_trimming_is_not_enough() -> None:
    resumables, _ = _cut_then_crowded(1, 10)
    assert 1 not in resumables.records


def test_a_tenant_keeps_at_most_its_count_of_records_the_oldest_finished_going_first() -> None:
    count = RecordCount(2)
    alice, bob = Resumables(KeptBudget(), count), Resumables(KeptBudget(), count)
    gone = Owner()
    first = alice.start(1, "bash", "default", gone)
    alice.cut(gone)
    alice.end(first, RESULT)
    bob.start(1, "bash", "default", Owner())
    # Full: alice's finished record makes way for her next one.
    alice.start(2, "bash", "default", Owner())
    assert list(alice.records) == [2]
    # Full, and nothing of bob's has finished: his next runs, not kept.
    bob.start(2, "bash", "default", Owner())
    assert list(bob.records) == [1]
    assert count.kept == 2


def test_requests_in_flight_count_and_cut_records_give_way_to_them() -> None:
    budget = KeptBudget(BUDGET)
    resumables = Resumables(budget)
    gone = Owner()
    _filled(resumables, 1, gone, 6)
    resumables.cut(gone)
    budget.hold(6000)
    # 6,000 bytes kept and 6,000 waiting: the cut record's oldest chunks went.
    assert budget.used <= BUDGET and budget.requests == 6000
    kept = budget.used - 6000
    budget.drop(6000)
    assert budget.requests == 0 and budget.used == kept


def test_a_request_that_would_take_requests_past_the_budget_is_refused_unchanged() -> None:
    budget = KeptBudget(BUDGET)
    budget.hold(BUDGET - 100)
    with pytest.raises(errors.OverBudget) as refused:
        budget.hold(101)
    assert (refused.value.size, refused.value.held, refused.value.budget) == (
        101,
        BUDGET - 100,
        BUDGET,
    )
    assert budget.requests == budget.used == BUDGET - 100
    budget.hold(100)  # exactly to the budget fits
    budget.drop(BUDGET)
    assert budget.requests == budget.used == 0
