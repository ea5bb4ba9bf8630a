"""stdio itself: only protocol lines on stdout, and no child ever holds the protocol pipes."""

from __future__ import annotations

import json
import os

from tests.rpc import ServerProcess


def test_children_never_hold_the_protocol_pipes(process: ServerProcess) -> None:
    assert process.proc.stdin is not None and process.proc.stdout is not None
    protocol_pipes = {
        os.fstat(process.proc.stdin.fileno()).st_ino,
        os.fstat(process.proc.stdout.fileno()).st_ino,
    }
    process.bash("sleep 30 & echo to-stdout; echo to-stderr >&2")
    children = process.owned_processes()
    assert len(children) >= 2  # the shell and the sleep
    for pid in children:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                inode = os.stat(f"/proc/{pid}/fd/{fd}").st_ino
            except OSError:
                continue
            assert inode not in protocol_pipes, (pid, fd)


def test_stdout_carries_only_protocol_lines(process: ServerProcess) -> None:
    process.bash("echo to-stdout; echo to-stderr >&2; exec 1>&2; echo more")
    process.close()
    assert process.garbage == []
    assert all(isinstance(json.loads(line), (dict, list)) for line in process.raw_lines)
