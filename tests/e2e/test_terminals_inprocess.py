"""Background jobs on an in-process server: bounds that need many jobs."""

from __future__ import annotations

from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalListParams,
    TerminalListResult,
)
from bashrpc.server.runtime.jobs.jobtable import MAX_EXITED_KEPT
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import wait_until

BOUND_SECONDS = 60.0


def listing(server: InProcessServer) -> TerminalListResult:
    return server.typed(TerminalListResult, "terminal/list", TerminalListParams())


def test_ended_jobs_nobody_released_are_kept_to_a_bound(spawn: SpawnInProcess) -> None:
    server = spawn("[jobs]\nmaxPerSession = 100\nmaxTotal = 100\n")
    ids = []
    for _ in range(MAX_EXITED_KEPT + 6):
        params = TerminalCreateParams(session_id="many", command="true")
        ids.append(server.typed(TerminalCreateResult, "terminal/create", params).terminal_id)
        assert wait_until(
            lambda: all(t.state == "exited" for t in listing(server).terminals), BOUND_SECONDS
        )
    kept = [t.terminal_id for t in listing(server).terminals]
    # The newest are kept, the oldest forgotten.
    assert kept == ids[-MAX_EXITED_KEPT:]
