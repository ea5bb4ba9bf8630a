"""A shell whose start is cut short, with the real bash.

A command's shell starts inside the request that needs it, so cancelling the
request (an abort, the client's EOF, the server's wind-down) cancels the start.
Whatever point the cut lands on, closing that shell afterwards must return:
the server's wind-down waits for it, and a close that never returns keeps the
server alive after its client has gone.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import msgspec
import pytest

from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.instance import Options, Runtime
from bashrpc.server.settings import Settings
from tests.rpc import owned_processes, wait_until

pytestmark = pytest.mark.slow

SETTINGS = b"[bash]\nsnapshot = false\n"
# Generous: a close takes milliseconds; only a hang fails it.
CLOSE_BOUND_SECONDS = 20.0


def test_closing_a_shell_whose_start_was_cancelled_returns(tmp_path: Path) -> None:
    """The cut lands on the start's first checkpoint, just after the spawn, where
    the shell's exit watcher is cancelled before it has seen anything."""
    settings = msgspec.toml.decode(SETTINGS, type=Settings)
    options = Options(settings, tmp_path, "/bin/bash", tmp_path / "artifacts")
    (tmp_path / "run").mkdir()

    async def main() -> None:
        async with Runtime.open(options, tmp_path / "run", Containment(None)) as runtime:
            session = runtime.session("cut")
            shell = runtime.backend.shell(session.config, session.env, str(tmp_path), "cut")
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as cut:
                    cut.cancel()
                    await tg.start(shell.serve)
                assert cut.cancelled_caught
                await shell.close(0.5)

    # The close is shielded, so only a thread's join can bound it.
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:
            failed.append(exc)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(CLOSE_BOUND_SECONDS)
    assert done.is_set(), "closing the shell whose start was cut never returned"
    if failed:
        raise failed[0]
    assert wait_until(lambda: owned_processes(os.getpid()) == [], timeout=5)
