"""A session whose shell was lost (abort, timeout, `exit`, idle close) says so in
the first result that can: `shellRestarted: true` and a notice in the text, on
both surfaces; the directory and the session's environment carry over."""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.client import notification_params
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashChunk, BashParams, BashResult
from tests.conftest import SpawnInProcess
from tests.e2e.test_tools import call_tool, structured, text_of
from tests.inprocess import InProcessServer
from tests.rpc import process_gone, wait_until

IDLE_BOUND_SECONDS = 20.0
BUSY_SECONDS = 30


def test_a_timeout_says_the_shell_restarted_once(server: InProcessServer) -> None:
    (server.tmp / "sub").mkdir()
    server.bash("cd sub; export GONE=1")
    result = server.bash(f"echo before; sleep {BUSY_SECONDS}", timeout=1)
    assert result.timed_out and result.shell_restarted
    assert result.output == f"{messages.timed_out_notice(1)}\n{messages.SHELL_RESTARTED}\nbefore\n"
    after = server.bash('pwd; echo "[${GONE-}]"')
    # Told once: the next result is an ordinary one, in the directory kept.
    assert after.output == f"{server.tmp}/sub\n[]\n" and not after.shell_restarted


def running(server: InProcessServer, command: str) -> RequestId:
    """The id of `command`, once its shell runs it (it prints `started` first)."""
    ident = server.request("bash", BashParams(command=f"echo started; {command}"))
    server.wait_for(
        lambda m: m.method == "bash/chunk" and notification_params(m, BashChunk).request_id == ident
    )
    return ident


def test_an_abort_says_the_shell_restarted(server: InProcessServer) -> None:
    ident = running(server, f"sleep {BUSY_SECONDS}")
    assert server.abort(request_id=ident)
    result = server.bash_result(ident)
    assert result.cancelled and result.shell_restarted
    assert result.output == f"{messages.NOTICE_CANCELLED}\n{messages.SHELL_RESTARTED}\nstarted\n"


def test_an_ordinary_result_has_no_shell_restarted_on_the_wire(server: InProcessServer) -> None:
    reply = server.call("bash", BashParams(command="echo hi"))
    assert reply.error is None and bytes(reply.result), reply
    assert b"shellRestarted" not in bytes(reply.result)
    assert not server.bash("true").shell_restarted


def test_the_next_command_after_an_idle_close_says_so(spawn: SpawnInProcess) -> None:
    server = spawn("[sessions]\nidleSeconds = 1\n")
    server.bash("export GONE=1")
    pid = server.sessions()["default"].pid
    assert pid is not None
    assert wait_until(lambda: process_gone(pid), timeout=IDLE_BOUND_SECONDS)
    result: BashResult = server.bash('echo "[${GONE-}]"')
    assert result.shell_restarted
    assert result.output == f"{messages.SHELL_RESTARTED}\n[]\n"
    assert not server.bash("true").shell_restarted


def test_a_timed_out_tool_call_says_the_shell_restarted(server: InProcessServer) -> None:
    call_tool(server, command="export GONE=1")
    result = call_tool(server, command=f"sleep {BUSY_SECONDS}", timeout=1)
    assert structured(result).timed_out and structured(result).shell_restarted
    assert messages.SHELL_RESTARTED in text_of(result)
    after = call_tool(server, command='echo "[${GONE-}]"')
    assert text_of(after) == "[]\n" and not structured(after).shell_restarted


def test_exit_says_the_shell_restarted(server: InProcessServer) -> None:
    result = server.bash("exit 3")
    assert result.exit_code == 3 and result.shell_restarted
    assert not server.bash("true").shell_restarted


def test_a_directory_gone_since_starts_the_new_shell_in_the_workspace(
    server: InProcessServer,
) -> None:
    (server.tmp / "doomed").mkdir()
    server.bash("cd doomed && rmdir ../doomed")
    assert server.bash("exit").shell_restarted
    result = server.bash("pwd")
    gone = messages.SHELL_CWD_GONE.format(cwd=server.tmp / "doomed", workspace=server.tmp)
    assert result.output == f"{gone}\n{server.tmp}\n" and result.exit_code == 0
    assert result.working_dir == str(server.tmp)
