"""A confined session's shell restarted (by `exit`, a timeout, an abort, an idle
close, or a one-shot shell, `oneShot`) sees the sandbox's own view, never a
directory a command `cd`'d into re-bound from the host: not the host's /tmp over
the private one, not the host's / (with its /proc, and its nodev /dev) over all."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashParams, SessionOpenParams
from tests.conftest import SpawnInProcess
from tests.e2e.test_tools import call_tool, structured, text_of
from tests.inprocess import InProcessServer
from tests.rpc import process_gone, wait_until
from tests.sandboxing import skip_without_sandbox

# Generous: a restart is a shell start, some milliseconds.
IDLE_BOUND_SECONDS = 20.0
BUSY_SECONDS = 30


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


@pytest.fixture
def host_marker() -> Iterator[Path]:
    """A file in the host's /tmp, which no confined shell may see."""
    path = Path("/tmp") / f"bashrpc-host-{uuid.uuid4().hex}"
    path.write_text("host\n")
    try:
        yield path
    finally:
        path.unlink()


def confined(spawn: SpawnInProcess, extra: str = "") -> InProcessServer:
    server: InProcessServer = spawn(f'[sandbox]\nmode = "workspace-write"\n{extra}')
    return server


def restart(server: InProcessServer, how: str, probe: str) -> str:
    """Lose the default session's shell `how`, then run `probe` on the shell that
    replaces it (for `one-shot` and `pty`: on that shell); its output, less the notice
    that the shell restarted where that is the first result to say so."""
    if how == "exit":
        assert server.bash("exit").shell_restarted
    elif how == "timeout":
        assert server.bash(f"sleep {BUSY_SECONDS}", timeout=1).shell_restarted
    elif how == "abort":
        ident = server.request("bash", BashParams(command=f"sleep {BUSY_SECONDS}"))
        assert wait_until(lambda: server.sessions()["default"].state == "busy")
        assert server.abort(request_id=ident)
        assert server.bash_result(ident).shell_restarted
    elif how == "idle":
        pid = server.sessions()["default"].pid
        assert pid is not None
        assert wait_until(lambda: process_gone(pid), timeout=IDLE_BOUND_SECONDS)
        after = server.bash(probe)
        assert after.shell_restarted
        return after.output.removeprefix(f"{messages.SHELL_RESTARTED}\n")
    elif how == "one-shot":
        ident = server.request("bash", BashParams(command=f"sleep {BUSY_SECONDS}"))
        assert wait_until(lambda: server.sessions()["default"].state == "busy")
        result = server.bash(probe, one_shot=True)
        server.abort(request_id=ident)
        server.bash_result(ident)
        return result.output
    elif how == "pty":
        return server.bash(probe, pty=True).output
    return server.bash(probe).output


HOW = ["exit", "timeout", "abort", "idle", "one-shot"]


@pytest.mark.parametrize("how", HOW)
def test_cd_tmp_then_a_restart_keeps_the_private_tmp(
    spawn: SpawnInProcess, how: str, host_marker: Path
) -> None:
    server = confined(spawn, "[sessions]\nidleSeconds = 1\n" if how == "idle" else "")
    assert server.bash(f"cd /tmp && ls {host_marker} 2>/dev/null; pwd").output == "/tmp\n"
    # The new shell is in /tmp, its own private one: the host's file is not there.
    probe = f"pwd; cat {host_marker} 2>&1 >/dev/null | wc -l; touch /tmp/w && echo writable"
    assert restart(server, how, probe).startswith("/tmp\n1\nwritable\n")


@pytest.mark.parametrize("how", HOW)
def test_cd_root_then_a_restart_keeps_the_sandboxs_dev_and_proc(
    spawn: SpawnInProcess, how: str
) -> None:
    server = confined(spawn, "[sessions]\nidleSeconds = 1\n" if how == "idle" else "")
    assert server.bash("cd / && pwd").output == "/\n"
    probe = "pwd; echo x > /dev/null && echo null-ok; cat /proc/1/comm"
    assert restart(server, how, probe).startswith("/\nnull-ok\nbwrap\n")
    # Not bricked: the session keeps working.
    result = server.bash("echo again")
    assert result.exit_code == 0 and result.output.startswith("again\n")


@pytest.mark.parametrize("how", ["exit", "one-shot", "pty"])
def test_a_directory_in_the_old_private_tmp_falls_back_to_the_workspace(
    spawn: SpawnInProcess, tmp_path: Path, how: str
) -> None:
    server = confined(spawn)
    assert server.bash("mkdir -p /tmp/mine && cd /tmp/mine && pwd").output == "/tmp/mine\n"
    notice = messages.SHELL_CWD_GONE.format(cwd="/tmp/mine", workspace=tmp_path)
    assert restart(server, how, "pwd") == f"{notice}\n{tmp_path}\n"


def test_a_pty_in_root_gets_the_sandboxs_proc(spawn: SpawnInProcess, host_marker: Path) -> None:
    server = confined(spawn)
    probe = f"pwd; cat /proc/1/comm; test -e {host_marker} || echo hidden"
    result = server.bash(probe, pty=True, cwd="/")
    assert result.output.splitlines() == ["/", "bwrap", "hidden"]


def test_a_session_the_host_opened_elsewhere_survives_a_restart(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    elsewhere = tmp_path.parent / f"{tmp_path.name}-opened"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("kept\n")
    server = confined(spawn)
    server.result("session/open", SessionOpenParams(session_id="o", cwd=str(elsewhere)))
    assert server.bash("exit", session_id="o").shell_restarted
    result = server.bash("pwd; cat notes.txt; touch new 2>/dev/null || echo ro", session_id="o")
    assert result.output == f"{elsewhere}\nkept\nro\n"
    assert not result.shell_restarted


def test_a_busy_one_shot_in_a_directory_seen_by_both_enters_it(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    server = confined(spawn)
    server.bash("cd sub")
    ident = server.request("bash", BashParams(command=f"sleep {BUSY_SECONDS}"))
    assert wait_until(lambda: server.sessions()["default"].state == "busy")
    result = server.bash("pwd", one_shot=True)
    assert result.output == f"{tmp_path}/sub\n" and not result.shell_restarted
    server.abort(request_id=ident)
    server.bash_result(ident)


def test_a_command_with_a_cwd_of_its_own_is_not_told_of_a_fallback(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    """Tool calls always name their directory: where the new shell started is moot."""
    server = confined(spawn)
    call_tool(server, command="mkdir -p /tmp/mine && cd /tmp/mine")
    assert structured(call_tool(server, command="exit")).shell_restarted
    result = call_tool(server, command="pwd")
    assert text_of(result) == f"{tmp_path}\n"
    pty = server.bash("pwd", pty=True, cwd=str(tmp_path), session_id="@tools")
    assert pty.output == f"{tmp_path}\n"
