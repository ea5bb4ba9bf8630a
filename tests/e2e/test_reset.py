"""`session/reset`: a warm pool's sandbox handed to its next task, with nothing
of the previous task left, checked in /proc; and `server/stats` in one server."""

from __future__ import annotations

from pathlib import Path

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import (
    BashParams,
    ServerStatsParams,
    ServerStatsResult,
    SessionOpenParams,
    SessionResetParams,
    SessionResetResult,
)
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalOutputParams,
    TerminalOutputResult,
)
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import error_of, marked_processes, ok_result, wait_until
from tests.sandboxing import skip_without_sandbox

HANG_SECONDS = 30.0


def reset(server: InProcessServer, session_id: str | None = None) -> SessionResetResult:
    return server.typed(
        SessionResetResult, "session/reset", SessionResetParams(session_id=session_id)
    )


def test_reset_kills_jobs_and_escapees_and_restores_cwd_and_env(
    server: InProcessServer, tmp_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    server.bash("cd sub; export LEFT=over; alias ll='ls -l'")
    server.bash(
        "(exec -a reset-job-marker sleep 300) &"
        " setsid bash -c 'exec -a reset-setsid-marker sleep 300' &"
    )
    assert wait_until(lambda: len(marked_processes("reset-")) == 2, timeout=HANG_SECONDS)

    [done] = reset(server, "default").sessions
    assert done.session_id == "default"
    # The shell, the job and the escapee, at least.
    assert done.processes_killed >= 3
    assert done.cwd == str(tmp_path)
    assert wait_until(lambda: marked_processes("reset-") == [], timeout=HANG_SECONDS)
    after = server.bash('pwd; echo "LEFT=$LEFT"; type ll 2>&1 | head -c 20')
    assert after.output.startswith(f"{tmp_path}\nLEFT=\n")
    assert "alias" not in after.output
    # The host asked for the loss: the result does not report a restart.
    assert not after.shell_restarted


def test_reset_aborts_a_running_command(server: InProcessServer) -> None:
    ident = server.request("bash", BashParams(command="exec -a reset-running-marker sleep 300"))
    assert wait_until(lambda: marked_processes("reset-running-") != [], timeout=HANG_SECONDS)
    [done] = reset(server, "default").sessions
    assert done.commands_aborted == 1
    assert server.bash_result(ident).cancelled
    assert marked_processes("reset-running-") == []


def test_reset_without_a_session_resets_every_session(server: InProcessServer) -> None:
    for name in ("a", "b"):
        server.result("session/open", SessionOpenParams(session_id=name))
        server.bash(f"(exec -a reset-all-{name} sleep 300) &", session_id=name)
    done = reset(server)
    assert sorted(s.session_id for s in done.sessions) == ["a", "b"]
    assert wait_until(lambda: marked_processes("reset-all-") == [], timeout=HANG_SECONDS)


def test_an_unknown_session_is_a_clear_error(server: InProcessServer) -> None:
    error = error_of(server.call("session/reset", SessionResetParams(session_id="nope")))
    assert error.code == -32602 and "nope" in error.message


def test_reset_empties_a_confined_sessions_private_tmp(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    skip_without_sandbox()
    server = spawn('[sandbox]\nmode = "workspace-write"\n')
    server.bash("touch /tmp/a /tmp/b; mkdir /tmp/c")
    [done] = reset(server, "default").sessions
    assert done.tmp_entries_removed == 3
    assert server.bash("ls -d /tmp/a /tmp/b /tmp/c 2>/dev/null | wc -l").output == "0\n"


def test_server_stats_counts_a_stdio_servers_commands_by_outcome(server: InProcessServer) -> None:
    before = server.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    # The timeout first: it takes the shell with it, and the next command starts one.
    server.bash("sleep 5", timeout=1)
    server.bash("echo hi")
    server.bash("false")
    after = server.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    assert (after.connections, after.tenants, after.sessions, after.shells) == (1, 0, 1, 1)
    assert after.commands_started - before.commands_started == 3
    finished = after.commands_finished
    assert finished.ok - before.commands_finished.ok == 1
    assert finished.failed - before.commands_finished.failed == 1
    assert finished.timed_out - before.commands_finished.timed_out == 1
    assert after.kills.timeout - before.kills.timeout == 1
    assert after.command_seconds.count - before.command_seconds.count == 3


def test_server_stats_shows_the_queue_depth(server: InProcessServer, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    first = server.request("bash", BashParams(command=f"until [ -e {gate} ]; do sleep 0.05; done"))
    waiting = [server.request("bash", BashParams(command="true")) for _ in range(2)]

    def queued() -> int:
        stats = server.typed(ServerStatsResult, "server/stats", ServerStatsParams())
        return stats.commands_queued

    assert wait_until(lambda: queued() == 2, timeout=HANG_SECONDS)
    stats = server.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    assert stats.commands_running == 1
    gate.touch()
    for ident in [first, *waiting]:
        server.bash_result(ident)
    assert queued() == 0


def test_reset_ends_the_sessions_background_jobs(server: InProcessServer) -> None:
    created = server.typed(
        TerminalCreateResult,
        "terminal/create",
        TerminalCreateParams(session_id="default", command="exec -a reset-term-marker sleep 300"),
    )
    assert wait_until(lambda: marked_processes("reset-term-") != [], timeout=HANG_SECONDS)
    stats = server.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    assert stats.jobs == 1
    [done] = reset(server, "default").sessions
    assert done.jobs_ended == 1
    assert marked_processes("reset-term-") == []
    error = error_of(
        server.call(
            "terminal/output",
            TerminalOutputParams(session_id="default", terminal_id=created.terminal_id),
        )
    )
    assert error.code == ErrorCode.RESOURCE_NOT_FOUND
    assert server.typed(ServerStatsResult, "server/stats", ServerStatsParams()).jobs == 0


def test_requests_during_a_reset_wait_for_it_and_see_the_fresh_session(
    server: InProcessServer, tmp_path: Path
) -> None:
    """A job that ignores TERM keeps the reset in its kill grace; a `bash` and a
    `terminal/create` sent meanwhile run after the reset answers, on the fresh
    session: nothing of the last task's state, and a job that outlives the reset."""
    (tmp_path / "sub").mkdir()
    trapping, termed = tmp_path / "trapping", tmp_path / "termed"
    server.bash("export SECRET=hunter2; cd sub")
    server.typed(
        TerminalCreateResult,
        "terminal/create",
        TerminalCreateParams(
            session_id="default",
            # The job's leader dies at once; what it started gets a TERM and a grace.
            command=f"bash -c \"trap 'touch {termed}' TERM; touch {trapping};"
            ' while :; do sleep 0.05; done" & wait',
        ),
    )
    assert wait_until(trapping.exists, timeout=HANG_SECONDS)
    resetting = server.request("session/reset", SessionResetParams(session_id="default"))
    assert wait_until(termed.exists, timeout=HANG_SECONDS)
    during = server.request("bash", BashParams(command='echo "SECRET=$SECRET"; pwd'))
    late = server.request(
        "terminal/create",
        TerminalCreateParams(
            session_id="default", command="pwd; exec -a reset-late-marker sleep 300"
        ),
    )
    [done] = ok_result(server.response(resetting, HANG_SECONDS), SessionResetResult).sessions
    after = server.bash_result(during, HANG_SECONDS)
    job = ok_result(server.response(late, HANG_SECONDS), TerminalCreateResult).terminal_id
    assert after.output == f"SECRET=\n{tmp_path}\n"
    assert done.commands_aborted == 0 and done.jobs_ended == 1
    # The job started in the fresh session, and the reset left it running.
    read = TerminalOutputParams(session_id="default", terminal_id=job)

    def printed() -> str:
        return server.typed(TerminalOutputResult, "terminal/output", read).output

    assert wait_until(lambda: printed() != "", timeout=HANG_SECONDS)
    assert printed() == f"{tmp_path}\n"
    assert marked_processes("reset-late-") != []
