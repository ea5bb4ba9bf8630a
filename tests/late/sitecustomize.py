"""Late on purpose: the server's asynchronous effects made late, to find the tests
that read them before they are due (each one a flake on a loaded machine).

    PYTHONPATH=$PWD/tests/late BASHRPC_TEST_LATE=log,tunnel,settle,reap,start \
        .venv/bin/python -m pytest -q --deselect tests/unit/test_commandrun.py

Python imports this file at start in every interpreter with it on its path: the
test process (its in-process servers) and the servers it starts, which inherit
the variables. Each name makes one effect late, as a loaded machine may:

- `log`: the log's thread writes each line to stderr 0.2 s late
  (`server/log.py`), so a warning lands well after the reply to the request
  that caused it;
- `tunnel`: a connection the allowlist let through ends 0.5 s after its last
  byte, listed open meanwhile (`runtime/network/tunnel.py`), as with a host slow
  to hang up: its audit entry and its counts come after its command's answer;
- `settle`: a command's output FIFO is settled 0.3 s after its command ends
  rather than in the loop's next turn (`runtime/shell/channels.py`), as when
  the server is descheduled right after a reply: its path is there for a while
  after the answer. It changes what `tests/unit/test_commandrun.py` checks
  (settling in the loop's next turn), so that file is left out; and a loop that
  ends within those 0.3 s never settles, leaving its FIFOs open in the process
  (an in-process server's), which no test may count as its own;
- `reap`: a child's exit is collected 0.3 s after it happened
  (`runtime/containment/child.py`), as by a server busy elsewhere: a shell, a
  job or a PTY program stays a zombie meanwhile, and what follows its end (a
  job's status, a shell found gone) comes late;
- `start`: a session's shell starts 0.3 s late (`runtime/shell/process.py`),
  as a fork does on a loaded machine: a command that starts one waits.

A test that fails only this way reads what it should wait for
(`tests.rpc.logged`, `wait_until`). Not part of the suite's run: a tool for
whoever adds such a test. Patched by name when each module loads: a renamed
target fails the import loudly rather than making nothing late.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any

LATE_ENV = "BASHRPC_TEST_LATE"
LOG_SECONDS = 0.2
TUNNEL_SECONDS = 0.5
SETTLE_SECONDS = 0.3
REAP_SECONDS = 0.3
START_SECONDS = 0.3


def _late_log(module: ModuleType) -> None:
    write = module.StderrQueue._out

    def late(self: Any, data: bytes | str) -> None:
        # A process's own stderr only: the queue's unit tests write to pipes.
        if self._fd == module.STDERR_FD:
            time.sleep(LOG_SECONDS)
        write(self, data)

    module.StderrQueue._out = late


def _late_tunnel(module: ModuleType) -> None:
    import anyio

    run = module.Tunnel.run

    async def late(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            await run(self, *args, **kwargs)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(TUNNEL_SECONDS)

    module.Tunnel.run = late


def _late_settle(module: ModuleType) -> None:
    settle = module.Fifos._settle

    def late(self: Any, pipe: Any) -> None:
        self._loop.call_later(SETTLE_SECONDS, settle, self, pipe)

    module.Fifos._settle = late


def _late_reap(module: ModuleType) -> None:
    import anyio

    wait_status: Callable[[int], Awaitable[int | None]] = module.wait_status

    async def late(pid: int) -> int | None:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return await wait_status(pid)
        try:
            await anyio.wait_readable(pidfd)
        finally:
            anyio.notify_closing(pidfd)
            os.close(pidfd)
        await anyio.sleep(REAP_SECONDS)
        return await wait_status(pid)

    module.__dict__["wait_status"] = late


def _late_start(module: ModuleType) -> None:
    import anyio

    spawn = module.Shell._spawn

    async def late(self: Any) -> None:
        await anyio.sleep(START_SECONDS)
        await spawn(self)

    module.Shell._spawn = late


PATCHES: dict[str, tuple[str, Callable[[ModuleType], None]]] = {
    "log": ("bashrpc.server.log", _late_log),
    "tunnel": ("bashrpc.server.runtime.network.tunnel", _late_tunnel),
    "settle": ("bashrpc.server.runtime.shell.channels", _late_settle),
    "reap": ("bashrpc.server.runtime.containment.child", _late_reap),
    "start": ("bashrpc.server.runtime.shell.process", _late_start),
}


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the patched modules as Python would, and patches each once it ran."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self._patches = patches

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self._patches.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(names: str) -> None:
    """Make late what `names` (comma-separated) names; an unknown name is an error."""
    wanted = [name for name in names.split(",") if name]
    unknown = [name for name in wanted if name not in PATCHES]
    if unknown:
        raise SystemExit(f"{LATE_ENV}: unknown {unknown}; known: {sorted(PATCHES)}")
    patches = dict(PATCHES[name] for name in wanted)
    sys.meta_path.insert(0, _Finder(patches))


if os.environ.get(LATE_ENV):
    install(os.environ[LATE_ENV])
