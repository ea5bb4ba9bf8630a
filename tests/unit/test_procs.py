"""procs.Scan on a real process tree, with and without the kernel's children lists."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest

from bashrpc.server.runtime.containment import procs
from tests.rpc import wait_until

# bash, two sleeps it waits for, and a subshell with a sleep of its own.
TREE = "sleep 30 & sleep 30 & ( sleep 30; true ) & wait"
TREE_SIZE = 5
STARTED_SECONDS = 10.0


@pytest.fixture
def tree() -> Iterator[int]:
    leader = subprocess.Popen(["bash", "-c", TREE])
    try:

        def started() -> bool:
            return len(procs.Scan().descendants([leader.pid])) == TREE_SIZE

        assert wait_until(started, STARTED_SECONDS)
        yield leader.pid
    finally:
        members = procs.Scan().descendants([leader.pid])
        procs.signal_all(members, signal.SIGKILL)
        leader.wait()


@pytest.mark.parametrize("lists", [True, False], ids=["children lists", "parents"])
def test_a_scan_finds_the_whole_tree_either_way(
    tree: int, lists: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_lists = procs.Scan().descendants([tree])
    monkeypatch.setattr(procs, "CHILDREN_LISTS", lists)
    scan = procs.Scan()
    assert scan.descendants([tree]) == with_lists
    assert len(with_lists) == TREE_SIZE and tree in with_lists
    assert procs.direct_children(tree) == scan.children(tree)
    assert len(scan.children(tree)) == 3
    assert procs.chain(tree, 2)[0] == tree and len(procs.chain(tree, 2)) == 2


def test_a_gone_or_recycled_process_is_not_live(tree: int) -> None:
    scan = procs.Scan()
    info = scan.info(tree)
    assert info is not None and scan.live(tree, info.start)
    assert not scan.live(tree, info.start + 1)
    assert not procs.Scan().live(2**22 + 1)


def test_parents_come_before_their_children(tree: int) -> None:
    members = procs.Scan().descendants([tree])
    ordered = procs.parents_first(sorted(members, reverse=True))
    assert sorted(ordered) == sorted(members)
    for pid in ordered:
        info = procs.read_stat(pid)
        assert info is not None
        if info.ppid in members:
            assert ordered.index(info.ppid) < ordered.index(pid)
    assert ordered[0] == tree


def test_cpu_time_is_read(tree: int) -> None:
    busy = subprocess.Popen(["bash", "-c", "while :; do :; done"])
    try:
        assert wait_until(lambda: (info := procs.read_stat(busy.pid)) is not None and info.cpu > 0)
    finally:
        busy.kill()
        busy.wait()


@pytest.fixture
def namespace() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A bash in a cgroup namespace of its own, which starts a process in a session
    of its own (an escapee: nothing of its parentage left) for each line it reads."""
    if not procs.may_administer():
        pytest.skip("a cgroup namespace needs CAP_SYS_ADMIN")
    script = "while read _; do ( setsid sleep 60 & echo $! $BASHPID ); done"
    shell = subprocess.Popen(
        ["unshare", "--cgroup", "bash", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    own = procs.cgroup_namespace("self")
    number = None
    try:
        assert wait_until(lambda: procs.cgroup_namespace(shell.pid) not in (own, None))
        number = procs.cgroup_namespace(shell.pid)
        assert number is not None
        yield shell, number
    finally:
        if number is not None:
            escapees = procs.Scan().in_cgroup_namespace(number) - {shell.pid}
            procs.signal_all(escapees, signal.SIGKILL)
        shell.kill()
        shell.wait()


def escape(shell: subprocess.Popen[str]) -> int:
    """Have the shell start an escapee; its pid, once its parent is gone."""
    assert shell.stdin is not None and shell.stdout is not None
    shell.stdin.write("\n")
    shell.stdin.flush()
    escapee, parent = (int(pid) for pid in shell.stdout.readline().split())
    assert wait_until(lambda: not procs.alive([parent]))
    return escapee


def test_a_scan_asked_again_finds_what_was_born_in_the_namespace_since(
    namespace: tuple[subprocess.Popen[str], int],
) -> None:
    """Kills that look together share a scan: one that looks later must still see
    an escapee born after the first look, though its parent is gone."""
    shell, number = namespace
    scan = procs.Scan()
    first = escape(shell)
    assert scan.in_cgroup_namespace(number) == {shell.pid, first}
    later = escape(shell)
    assert scan.in_cgroup_namespace(number) == {shell.pid, first, later}


def test_a_session_is_found_only_while_its_number_names_its_leader() -> None:
    """A session's number is its leader's pid: once the leader and the whole session
    are gone, the number may be handed out again, to a process that makes a session
    of its own. A look by the number then takes nothing of that stranger's."""
    apart = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        info = procs.read_stat(apart.pid)
        assert info is not None
        scan = procs.Scan()
        assert scan.session(apart.pid, info.start) == {apart.pid}
        # The same number, as if recorded for a leader that started at another time.
        assert scan.session(apart.pid, info.start + 1) == set()
    finally:
        apart.kill()
        apart.wait()
