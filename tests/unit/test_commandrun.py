"""One command's life on a shell: the transition table (pure), then a `CommandRun`
on real FIFOs, written by the test as the shell would."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from bashrpc.server.runtime.shell.channels import READ_CHUNK_BYTES, Fifos
from bashrpc.server.runtime.shell.command import (
    STATES,
    TRANSITIONS,
    CommandRun,
    Event,
    State,
    advance,
)
from bashrpc.server.runtime.shell.protocol import StatusRecord
from bashrpc.server.transitions import InvalidTransition


def walk(*events: Event) -> State:
    state: State = "running"
    for event in events:
        state = advance(state, event)
    return state


def test_a_command_ends_drained_or_cut_and_collected() -> None:
    assert walk("end") == "ended"
    assert walk("end", "drained") == "done"
    assert walk("cut", "collected") == "done"
    # Cut while draining (an abort after the record).
    assert walk("end", "cut", "collected") == "done"


def test_only_the_first_end_counts() -> None:
    ended: tuple[State, ...] = ("ended", "cut", "done")
    for state in ended:
        assert advance(state, "end") == state


@pytest.mark.parametrize(
    ("events", "bad"),
    [
        ((), "drained"),  # drained before it ended
        ((), "collected"),  # collected though never cut
        (("end",), "collected"),
        (("cut",), "cut"),
        (("cut",), "drained"),
        (("end", "drained"), "cut"),  # a finished command is not cut
        (("cut", "collected"), "collected"),
    ],
)
def test_what_the_table_does_not_allow_is_refused(events: tuple[Event, ...], bad: Event) -> None:
    state = walk(*events)
    with pytest.raises(InvalidTransition, match=f"{bad} in {state}"):
        advance(state, bad)


def test_every_state_leads_to_done_and_done_leads_nowhere() -> None:
    reaches_done = {"done"}
    while True:
        more = {s for (s, _), t in TRANSITIONS.items() if t in reaches_done} - reaches_done
        if not more:
            break
        reaches_done |= more
    assert reaches_done == set(STATES)
    assert {t for (s, _), t in TRANSITIONS.items() if s == "done"} == {"done"}


def record(last_job: int | None = None, traps: str = "") -> StatusRecord:
    return StatusRecord(status=0, pwd="/", flags="hB", traps=traps, last_job=last_job)


def test_the_first_end_is_the_record_and_it_takes_the_fifos_path(tmp_path: Path) -> None:
    async def main() -> None:
        fifos = Fifos(tmp_path)
        out: list[bytes] = []
        run = CommandRun(fifos, None, out.append, None)
        writer = os.open(run.pipe.fifo.path, os.O_WRONLY)
        os.write(writer, b"hello\n")
        run.pipe.read_now()
        # Every byte is the command's, and its path stays while it runs.
        assert out == [b"hello\n"] and run.pipe.fifo.path in list(tmp_path.iterdir())
        first = record()
        run.end(first)
        run.end(None)  # the shell exiting after its record
        assert await run.until_ended() is first
        await run.drain()
        assert run.state == "done" and b"".join(out) == b"hello\n"
        # Its command is over: in the loop's next turn (its reply first) no path
        # leads to it, while what still writes (a job it left) holds it open,
        # and what that writes goes nowhere.
        await anyio.lowlevel.checkpoint()
        assert run.pipe.fifo.path not in list(tmp_path.iterdir())
        os.write(writer, b"later\n")
        run.pipe.read_now()
        assert b"".join(out) == b"hello\n"
        os.close(writer)
        # The next command gets a FIFO of its own.
        assert fifos.take(out.append, None).fifo.path != run.pipe.fifo.path
        fifos.close()

    anyio.run(main)


# More than one read's worth (64 KiB), less than the pipe holds: all of it is in
# the pipe as the command ends.
ENDED_WITH_BYTES = 200_000
# Longer than the silence that ends a drain (0.25 s): one read's handling on a
# machine two copies of the suite load on one CPU.
SLOW_HANDLING_SECONDS = 0.3


def test_what_a_command_wrote_is_read_whole_however_slow_its_handling(tmp_path: Path) -> None:
    """A drain ended on silence counted from the start of the last read: a read
    whose handling took longer ended it with the command's last lines still in
    the pipe (CI-like load lost 224 of 4,000), and they were discarded. A job
    the command left holds the FIFO, so no EOF ends the drain first."""

    async def main() -> None:
        fifos = Fifos(tmp_path)
        out: list[bytes] = []

        def slow(data: bytes) -> None:
            out.append(data)
            time.sleep(SLOW_HANDLING_SECONDS)

        run = CommandRun(fifos, None, slow, None)
        job = os.open(run.pipe.fifo.path, os.O_WRONLY | os.O_NONBLOCK)
        # As much as the pipe takes (the server asks for 1 MiB): more than one read.
        written = os.write(job, b"x" * ENDED_WITH_BYTES)
        assert written > READ_CHUNK_BYTES
        run.end(record())
        await run.until_ended()
        await run.drain()
        assert run.state == "done"
        assert len(b"".join(out)) == written
        os.close(job)
        fifos.close()

    anyio.run(main)


def test_a_cut_command_forwards_until_collected_then_gives_the_fifo_back(tmp_path: Path) -> None:
    async def main() -> None:
        fifos = Fifos(tmp_path)
        out: list[bytes] = []
        run = CommandRun(fifos, None, out.append, None)
        writer = os.open(run.pipe.fifo.path, os.O_WRONLY)
        run.cut()
        # Cut: no path leads to it from now on.
        assert run.pipe.fifo.path not in list(tmp_path.iterdir())
        run.end(None)  # the kill's end changes nothing
        assert (run.state, run.record) == ("cut", None)
        os.write(writer, b"dying words\n")
        os.close(writer)
        await run.collect()
        assert run.state == "done" and b"".join(out) == b"dying words\n"
        fifos.close()
        assert list(tmp_path.iterdir()) == []

    anyio.run(main)


def test_the_next_commands_fifo_is_made_while_this_one_runs(tmp_path: Path) -> None:
    """Making a FIFO (mkfifo, two opens, a watch) was most of a short command's
    cost: the first is made as the shell starts, each next one once a command
    has been handed over, while the server waits for the shell, so a command
    only takes it and no reply waits for it."""

    async def main() -> None:
        fifos = Fifos(tmp_path)
        await anyio.lowlevel.checkpoint()
        [ahead] = list(tmp_path.iterdir())
        out: list[bytes] = []
        run = CommandRun(fifos, None, out.append, None)
        assert run.pipe.fifo.path == ahead and list(tmp_path.iterdir()) == [ahead]
        # The command's task waits for its end: the next one is made meanwhile.
        await anyio.lowlevel.checkpoint()
        [following] = set(tmp_path.iterdir()) - {ahead}
        assert following.name.endswith(".out") and len(following.name) == len(ahead.name)
        writer = os.open(ahead, os.O_WRONLY)
        os.write(writer, b"hi\n")
        run.pipe.read_now()
        run.end(record())
        await run.until_ended()
        os.close(writer)
        await run.drain()
        await anyio.lowlevel.checkpoint()
        # Unlinked as its command ended; settling makes none more: the next
        # command takes the one made.
        assert list(tmp_path.iterdir()) == [following]
        taken = fifos.take(out.append, None)
        assert taken.fifo.path == following
        taken.stop()
        taken.fifo.close()
        # The shell's end makes nothing more, and leaves no path behind.
        fifos.close()
        await anyio.lowlevel.checkpoint()
        assert list(tmp_path.iterdir()) == []

    anyio.run(main)


def test_a_fifo_that_cannot_be_made_ahead_is_made_when_taken(tmp_path: Path) -> None:
    """Nothing is lost when the idle make fails: the command's own take makes
    it, and raises what the making raises."""

    async def main() -> None:
        gone = tmp_path / "gone"
        fifos = Fifos(gone)
        await anyio.lowlevel.checkpoint()
        with pytest.raises(FileNotFoundError):
            fifos.take(list[bytes]().append, None)
        gone.mkdir()
        taken = fifos.take(list[bytes]().append, None)
        assert taken.fifo.path.parent == gone
        taken.stop()
        taken.fifo.close()
        fifos.close()

    anyio.run(main)


def test_the_fields_restore_what_the_command_before_left(tmp_path: Path) -> None:
    async def main() -> None:
        fifos = Fifos(tmp_path)
        out: list[bytes] = []
        first = CommandRun(fifos, None, out.append, None)
        after_traps = CommandRun(fifos, record(traps="trap -- 'echo x' DEBUG\n"), out.append, None)
        fresh = first.fields("true", None, {}).split(b"\0")
        restored = after_traps.fields("true", None, {}).split(b"\0")
        assert fresh[1] == b"\ntrue"
        assert restored[1] == b"\\builtin trap -- 'echo x' DEBUG\ntrue"
        for run in (first, after_traps):
            run.cut()
            await run.collect()
        fifos.close()

    anyio.run(main)


def test_a_fifo_settled_as_its_shell_closes_is_closed_with_no_path_left(tmp_path: Path) -> None:
    """Settling finishes in the loop's next turn: a shell that closes before
    then (its session closed right after a command) leaves no path and no
    descriptor, whether a job still holds the FIFO or not."""

    async def main() -> None:
        for held in (False, True):
            fifos = Fifos(tmp_path)
            run = CommandRun(fifos, None, lambda _: None, None)
            writer = os.open(run.pipe.fifo.path, os.O_WRONLY)
            if not held:
                os.close(writer)
            run.end(record(last_job=7))
            await run.until_ended()
            await run.drain()
            fifos.close()
            await anyio.lowlevel.checkpoint()
            assert list(tmp_path.iterdir()) == []
            with pytest.raises(OSError):
                os.fstat(run.pipe.fifo.fd)
            if held:
                os.close(writer)

    anyio.run(main)
