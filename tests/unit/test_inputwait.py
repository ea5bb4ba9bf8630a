"""The pure parts of input detection: the verdict over a look at /proc facts
(`containment/inputwait.py`) and the settle rule over looks (`run/inputwatch.py`)."""

from __future__ import annotations

import os
import termios

import msgspec

from bashrpc.server.runtime.containment import inputwait, procfacts
from bashrpc.server.runtime.containment.inputwait import Descriptor, Kind, ProcFacts, verdict
from bashrpc.server.runtime.run.inputwatch import Settling, prompt_of
from bashrpc.server.runtime.seam.backend import InputLook, Snapshot

NUMBERS = {
    "x86_64": {"read": 0, "poll": 7, "sleep": 230, "wait": 61, "flock": 73, "write": 1},
    "aarch64": {"read": 63, "poll": 73, "sleep": 115, "wait": 260, "flock": 32, "write": 64},
}[inputwait.MACHINE]
TTY = (Descriptor(0, Kind.TERMINAL), Descriptor(1, Kind.TERMINAL, writes=True))


def proc(
    pid: int, call: str | None, arg0: int = 0, fds: tuple[Descriptor, ...] = TTY, state: str = "S"
) -> ProcFacts:
    number = None if call is None else NUMBERS[call]
    return ProcFacts(pid, state, "", number, arg0, 0, f"p{pid}", fds)


def test_a_read_of_the_terminal_is_a_wait_and_names_the_deepest_reader() -> None:
    shell = proc(10, "wait")
    reader = proc(12, "read")
    found = verdict([shell, reader])
    assert (found.waiting, found.pid, found.program) == (True, 12, "p12")


def test_anything_busy_beside_it_is_no_wait() -> None:
    reader = proc(12, "read")
    for busy in (
        proc(13, None, state="R"),
        proc(13, None, state="D"),
        proc(13, "sleep"),
        proc(13, "flock"),
        proc(13, "write", 1),
    ):
        assert not verdict([reader, busy]).waiting, busy


def test_a_shell_waiting_on_a_sleeping_child_is_no_wait() -> None:
    assert not verdict([proc(10, "wait"), proc(11, "sleep")]).waiting
    assert not verdict([proc(10, "wait")]).waiting


def test_a_pipe_is_a_wait_only_when_none_of_the_command_writes_it() -> None:
    fed = (Descriptor(0, Kind.PIPE, inode=7), Descriptor(1, Kind.TERMINAL, writes=True))
    reader = proc(12, "read", 0, fed)
    writer = proc(11, "sleep", 0, (Descriptor(1, Kind.PIPE, inode=7, writes=True),))
    assert not verdict([writer, reader]).waiting
    # Fed from outside the command: nobody of it can say it waits for a person.
    assert not verdict([reader]).waiting


def test_a_pipe_its_person_writes_is_its_terminal() -> None:
    """A background job's stdin: the server writes it for the job's owner."""
    stdin = (Descriptor(0, Kind.PIPE, inode=7), Descriptor(1, Kind.PIPE, inode=8, writes=True))
    reader = proc(12, "read", 0, stdin)
    found = verdict([proc(10, "wait", 0, stdin), reader], frozenset({7}))
    assert (found.waiting, found.pid, found.terminal_fd) == (True, 12, None)
    # Another pipe than its stdin, or its stdin read by a process of its own: no.
    assert not verdict([reader], frozenset({9})).waiting
    writer = proc(11, "sleep", 0, (Descriptor(1, Kind.PIPE, inode=7, writes=True),))
    assert not verdict([writer, reader], frozenset({7})).waiting
    # Polled beside a socket (a server): it may be woken by the network.
    polling = proc(12, "poll", 0, (*stdin, Descriptor(3, Kind.SOCKET)))
    assert not verdict([polling], frozenset({7})).waiting
    assert verdict([proc(12, "poll", 0, stdin)], frozenset({7})).waiting


def test_a_poll_with_the_terminal_and_no_socket_is_a_wait() -> None:
    assert verdict([proc(20, "poll", 5)]).waiting
    with_socket = (*TTY, Descriptor(3, Kind.SOCKET))
    assert not verdict([proc(20, "poll", 5, with_socket)]).waiting
    without_terminal = (Descriptor(3, Kind.OTHER),)
    assert not verdict([proc(20, "poll", 5, without_terminal)]).waiting


def test_a_signal_wait_decides_nothing() -> None:
    init = proc(5, "read", 3, (Descriptor(3, Kind.SIGNAL),))
    assert verdict([init, proc(12, "read")]).waiting
    assert not verdict([init]).waiting


def test_the_rule_tells_once_after_the_settle_time() -> None:
    rule = Settling(1.0)
    waiting = InputLook(True, 12, "p12", cpu=5)
    assert not rule.look(waiting, 0.0)
    assert not rule.look(waiting, 0.5)
    assert rule.look(waiting, 1.0)
    assert not rule.look(waiting, 2.0)  # once per wait
    assert rule.moved()  # output came: the told wait ended
    assert not rule.look(waiting, 3.0)
    assert rule.look(waiting, 4.0)


def test_cpu_spent_or_another_process_starts_the_settle_again() -> None:
    rule = Settling(1.0)
    assert not rule.look(InputLook(True, 12, cpu=5), 0.0)
    assert not rule.look(InputLook(True, 12, cpu=6), 0.9)
    assert not rule.look(InputLook(True, 12, cpu=6), 1.5)
    assert not rule.look(InputLook(True, 13, cpu=6), 1.9)
    assert not rule.look(InputLook(False), 2.5)
    assert not rule.look(InputLook(True, 13, cpu=6), 3.0)
    assert rule.look(InputLook(True, 13, cpu=6), 4.0)


def test_another_process_asking_is_another_wait() -> None:
    rule = Settling(1.0)
    assert not rule.look(InputLook(True, 12, cpu=5), 0.0)
    assert rule.look(InputLook(True, 12, cpu=5), 1.0)
    assert not rule.look(InputLook(True, 12, cpu=9), 2.0)  # a redraw: the same wait
    assert rule.told
    assert not rule.look(InputLook(True, 14, cpu=9), 3.0)  # its child asks now
    assert not rule.told
    assert rule.look(InputLook(True, 14, cpu=9), 4.0)


def test_the_prompt_is_the_cursors_line_or_the_last_above_it() -> None:
    screen = Snapshot(20, 4, ["$ sudo -k true", "[sudo] password: ", "", ""], 17, 1)
    assert prompt_of(screen) == "[sudo] password:"
    blank_cursor = Snapshot(20, 4, ["Continue? [Y/n]", "", "", ""], 0, 1)
    assert prompt_of(blank_cursor) == "Continue? [Y/n]"


def test_a_writer_held_up_by_a_reader_of_its_own_command_decides_nothing() -> None:
    """`man` writing into `less`, which reads its terminal: waiting."""
    pipe_out = (Descriptor(1, Kind.PIPE, inode=9, writes=True),)
    writer = proc(30, "write", 1, pipe_out)
    pager = proc(31, "read", 3, (Descriptor(0, Kind.PIPE, inode=9), Descriptor(3, Kind.TERMINAL)))
    assert verdict([writer, pager]).waiting
    # Writing to a pipe nobody of the command reads (the host's): busy.
    assert not verdict([writer, proc(32, "read")]).waiting


def test_a_daemon_of_the_command_sleeping_on_its_clients_decides_nothing() -> None:
    """gpg-agent (a session of its own, no terminal) polls its sockets while gpg
    reads the passphrase from the terminal."""
    sockets = (Descriptor(0, Kind.OTHER), Descriptor(3, Kind.SOCKET))
    agent = msgspec.structs.replace(proc(40, "poll", 3, sockets), sid=40)
    gpg = msgspec.structs.replace(proc(41, "read"), sid=1)
    assert verdict([gpg, agent]).waiting
    # In the reader's own session, a process polling sockets is the network: busy.
    assert not verdict([gpg, msgspec.structs.replace(agent, sid=1)]).waiting


def test_descriptors_are_known_by_their_links_alone() -> None:
    """Nothing is followed: the link's text says the kind, fdinfo a pipe's ends."""
    me = str(os.getpid())
    assert procfacts.describe(0, "0", "/dev/pts/3").kind is Kind.TERMINAL
    assert procfacts.describe(0, "0", "/dev/tty").kind is Kind.TERMINAL
    assert procfacts.describe(0, "3", "socket:[77]").kind is Kind.SOCKET
    assert procfacts.describe(0, "4", "anon_inode:[signalfd]").kind is Kind.SIGNAL
    assert procfacts.describe(0, "5", "/dev/null").kind is Kind.OTHER
    read_end, write_end = os.pipe()
    try:
        link = os.readlink(f"/proc/self/fd/{read_end}")
        reading = procfacts.describe(int(me), str(read_end), link)
        writing = procfacts.describe(int(me), str(write_end), link)
        inode = int(link.removeprefix("pipe:[").removesuffix("]"))
        assert (reading.kind, reading.inode, reading.writes) == (Kind.PIPE, inode, False)
        assert (writing.inode, writing.writes) == (inode, True)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_terminals_modes_are_read_from_the_process_own_descriptor() -> None:
    master, slave = os.openpty()
    try:
        modes = termios.tcgetattr(slave)
        modes[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        lflag = procfacts.terminal_modes(os.getpid(), slave)
        assert lflag is not None and not lflag & termios.ECHO and lflag & termios.ICANON
        read_end, write_end = os.pipe()
        assert procfacts.terminal_modes(os.getpid(), read_end) is None  # no terminal
        os.close(read_end)
        os.close(write_end)
    finally:
        os.close(master)
        os.close(slave)
