"""How long a hung-up rc capture may run its EXIT traps: the pure rule, without a clock."""

from __future__ import annotations

from bashrpc.server.runtime.local.hangup import Progress, Sample

STALL = 2.0
BOUND = 30.0
SHELL = frozenset({(10, 1)})
SHELL_AND_SLEEP = frozenset({(10, 1), (11, 5)})


def _sample(
    members: frozenset[tuple[int, int]] = SHELL, cpu: int = 0, runnable: bool = False
) -> Sample:
    return Sample(members=members, cpu=cpu, runnable=runnable)


def test_no_progress_for_the_stall_time_gives_up() -> None:
    progress = Progress(0.0, STALL, BOUND)
    progress.note(0.1, _sample())
    progress.note(1.9, _sample())
    assert not progress.given_up(1.9)
    progress.note(2.2, _sample())
    assert progress.given_up(2.2)


def test_a_trap_that_forks_ends_and_runs_is_waited_for() -> None:
    progress = Progress(0.0, STALL, BOUND)
    progress.note(0.0, _sample())
    # `sleep 1` starts, then the machine is loaded: the shell waits for a CPU.
    progress.note(1.5, _sample(SHELL_AND_SLEEP))
    progress.note(3.0, _sample(SHELL_AND_SLEEP, runnable=True))
    progress.note(4.9, _sample(SHELL_AND_SLEEP))
    assert not progress.given_up(4.9)
    # The sleep is gone and the shell runs its `rm`.
    progress.note(6.5, _sample(SHELL, cpu=3))
    assert not progress.given_up(8.4)
    assert progress.given_up(8.5)


def test_progress_without_end_is_bounded() -> None:
    progress = Progress(0.0, STALL, BOUND)
    for tick in range(1, 40):
        progress.note(float(tick), _sample(cpu=tick))
    assert not progress.given_up(29.9)
    assert progress.given_up(BOUND)
