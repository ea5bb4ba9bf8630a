"""Background jobs under the daemon: they outlive a cut connection within the
detach grace, like sessions, and a job that ends while its owner is cut off
is told on the owner's next connection."""

from __future__ import annotations

import pytest

from bashrpc.protocol.methods import BashParams
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalEmptyResult,
    TerminalExited,
    TerminalListParams,
    TerminalListResult,
    TerminalParams,
    TerminalWriteParams,
    TerminalWriteResult,
)
from tests.daemon import introduce
from tests.e2e.conftest import SpawnDaemon
from tests.rpc import RpcClient, marked_processes, wait_until

pytestmark = pytest.mark.slow

BOUND_SECONDS = 60.0
SESSION = "jobs"


def create(client: RpcClient, command: str) -> str:
    params = TerminalCreateParams(session_id=SESSION, command=command)
    return client.typed(TerminalCreateResult, "terminal/create", params).terminal_id


def test_a_job_that_ends_while_its_owner_is_cut_is_told_on_reconnect(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "60").wait_listening()
    first = introduce(daemon.connect(), "owner")
    # It ends when told to: after the cut.
    terminal = create(first, "read -r; exit 5")
    first.cut()
    second = introduce(daemon.connect(), "owner")
    write = TerminalWriteParams(session_id=SESSION, terminal_id=terminal, data="go\n")
    # The job outlived the cut; the new connection reaches its stdin.
    second.typed(TerminalWriteResult, "terminal/write", write)
    second.wait_for(lambda m: m.method == "terminal/exited", BOUND_SECONDS)
    told = second.notified("terminal/exited", TerminalExited)
    assert [(t.terminal_id, t.exit_status.exit_code) for t in told] == [(terminal, 5)]
    second.close()


def test_an_end_while_nobody_listens_is_kept_for_the_next_connection(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "60").wait_listening()
    first = introduce(daemon.connect(), "owner")
    terminal = create(first, "sleep 0.5; exit 6")
    first.cut()
    # Ended with no connection of its owner there.
    assert wait_until(lambda: daemon.owned_processes() == [], BOUND_SECONDS)
    other = introduce(daemon.connect(), "someone-else")
    second = introduce(daemon.connect(), "owner")
    second.wait_for(lambda m: m.method == "terminal/exited", BOUND_SECONDS)
    told = second.notified("terminal/exited", TerminalExited)
    assert [(t.terminal_id, t.exit_status.exit_code) for t in told] == [(terminal, 6)]
    # Told once, and to its owner only.
    listing = second.typed(TerminalListResult, "terminal/list", TerminalListParams())
    assert [t.state for t in listing.terminals] == ["exited"]
    assert other.notified("terminal/exited", TerminalExited) == []
    second.typed(
        TerminalEmptyResult,
        "terminal/release",
        TerminalParams(session_id=SESSION, terminal_id=terminal),
    )
    other.close()
    second.close()


def test_jobs_end_when_the_detach_grace_runs_out(spawn_daemon: SpawnDaemon) -> None:
    daemon = spawn_daemon("--detach-grace", "1").wait_listening()
    client = introduce(daemon.connect(), "owner")
    create(client, "setsid sleep 300 & exec sleep 301")
    assert wait_until(lambda: len(daemon.owned_processes()) == 2, BOUND_SECONDS)
    client.cut()
    assert wait_until(lambda: daemon.owned_processes() == [], BOUND_SECONDS)


def test_a_connection_without_a_client_id_takes_its_jobs_with_it(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "60").wait_listening()
    client = daemon.connect()
    create(client, "exec sleep 300")
    assert wait_until(lambda: len(daemon.owned_processes()) == 1, BOUND_SECONDS)
    client.close()
    assert wait_until(lambda: daemon.owned_processes() == [], BOUND_SECONDS)


def test_an_end_during_a_cut_connections_wind_down_is_kept_for_the_next(
    spawn_daemon: SpawnDaemon,
) -> None:
    daemon = spawn_daemon("--detach-grace", "60").wait_listening()
    first = introduce(daemon.connect(), "owner")
    # A request of the cut connection runs on, so that connection is not over yet.
    first.request("bash", BashParams(command="exec -a cut-marker sleep 30"))
    terminal = create(first, "exec -a job-marker sleep 2")
    assert wait_until(lambda: marked_processes("cut-marker") != [], BOUND_SECONDS)
    first.cut()
    assert wait_until(lambda: marked_processes("job-marker") == [], BOUND_SECONDS)
    assert marked_processes("cut-marker") != []
    second = introduce(daemon.connect(), "owner")
    second.wait_for(lambda m: m.method == "terminal/exited", BOUND_SECONDS)
    told = second.notified("terminal/exited", TerminalExited)
    assert [t.terminal_id for t in told] == [terminal]
    second.close()
