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
