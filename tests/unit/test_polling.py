"""The backoff used to wait on dying processes: quick first checks, then a steady pace."""

from __future__ import annotations

import itertools

import anyio

from bashrpc.server.runtime.containment import polling


def test_pauses_double_from_the_first_up_to_the_steady_one() -> None:
    pauses = list(itertools.islice(polling.intervals(), 8))
    assert pauses[0] == polling.FIRST_POLL_SECONDS
    assert all(b == min(2 * a, polling.POLL_SECONDS) for a, b in itertools.pairwise(pauses))
    assert pauses[-1] == polling.POLL_SECONDS


def test_until_checks_at_once_and_counts_the_checks() -> None:
    checks = itertools.count(1)

    async def main() -> tuple[bool, bool]:
        at_once = await polling.until(lambda: True, timeout=0)
        third = await polling.until(lambda: next(checks) >= 3)
        return at_once, third

    assert anyio.run(main) == (True, True)
    assert next(checks) == 4  # exactly three checks: no wait after the one that held


def test_until_gives_up_after_the_timeout() -> None:
    async def main() -> tuple[bool, float]:
        started = anyio.current_time()
        held = await polling.until(lambda: False, timeout=0.05)
        return held, anyio.current_time() - started

    held, waited = anyio.run(main)
    assert held is False
    assert 0.05 <= waited < 0.5  # the bound only catches a hang


def test_repeat_while_acts_on_what_each_check_found() -> None:
    left = [3, 2, 1, 0]
    checks: list[int] = []
    acted: list[int] = []

    def remaining() -> int:
        checks.append(left[0])
        return left.pop(0)

    async def main() -> None:
        await polling.repeat_while(lambda: 0, acted.append)
        assert acted == []  # nothing left at once: nothing to do
        await polling.repeat_while(remaining, acted.append)

    anyio.run(main)
    assert acted == [3, 2, 1]
    assert checks == [3, 2, 1, 0]  # one check a round
