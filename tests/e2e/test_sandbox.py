"""The bubblewrap sandbox, with real bwrap: what each mode lets a command write and
reach, that a request can only tighten it, and what a refused write tells the model."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    LATEST_PROTOCOL_VERSION,
    BashStructured,
    ConnectionSettings,
    HostOptions,
    InitializeParams,
    SandboxOverrides,
)
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import BashParams, SandboxMode, SessionOpenParams
from tests.conftest import SpawnInProcess, SpawnProcess
from tests.e2e.test_tools import call_tool, text_of
from tests.inprocess import InProcessServer
from tests.rpc import wait_until
from tests.sandboxing import skip_without_sandbox

EXIT_BOUND_SECONDS = 20.0


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


def sandboxed(
    spawn: SpawnInProcess, mode: str, extra: str = "", workspace: Path | None = None
) -> InProcessServer:
    server: InProcessServer = spawn(f'[sandbox]\nmode = "{mode}"\n{extra}', workspace=workspace)
    return server


def asking_for(mode: SandboxMode | None = None) -> InitializeParams:
    """An initialize; with a mode, one whose settings ask for that sandbox."""
    if mode is None:
        return initialize_params()
    settings = ConnectionSettings(sandbox=SandboxOverrides(mode=mode))
    return initialize_params(HostOptions(settings=settings))


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port listening on the host's loopback, outside any sandbox."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def connect(port: int, host: str = "127.0.0.1") -> str:
    """A command that connects and prints `connected`, or the error's name."""
    code = (
        "import socket,sys\n"
        f"try: socket.create_connection(({host!r}, {port}), 2); print('connected')\n"
        "except OSError as e: print(type(e).__name__)"
    )
    # The interpreter itself, not a venv's link to it: a venv under /tmp is hidden
    # by the sandbox's private /tmp.
    return f'{os.path.realpath(sys.executable)} -c "{code}"'


def test_workspace_write_allows_the_workspace_and_refuses_the_rest(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    # A configured root that does not exist is skipped, not fatal.
    server = sandboxed(spawn, "workspace-write", "writableRoots = ['/nonexistent/root']\n")
    assert server.bash("echo made > inside.txt && cat inside.txt").output == "made\n"
    assert (tmp_path / "inside.txt").read_text() == "made\n"
    result = server.bash("touch /etc/bashrpc-test")
    assert result.exit_code == 1 and result.sandbox_denied
    notice = messages.SANDBOX_DENIED.format(
        mode="workspace-write",
        path="/etc/bashrpc-test",
        writable=f"{tmp_path}, {messages.SANDBOX_PRIVATE_TMP}",
    )
    assert result.output == (
        "touch: cannot touch '/etc/bashrpc-test': Read-only file system\n" + notice + "\n"
    )
    # /tmp is the shell's own: writable, and not the host's.
    assert server.bash("echo t > /tmp/bashrpc-private && cat /tmp/bashrpc-private").output == "t\n"
    assert not Path("/tmp/bashrpc-private").exists()


@pytest.mark.parametrize("commits", [False, True])
def test_git_hooks_and_config_stay_read_only(
    spawn: SpawnInProcess, tmp_path: Path, commits: bool
) -> None:
    """By default the whole git dir is read-only; with `gitCommits`, what decides
    what git runs."""
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "secret.env").write_text("x")
    extra = "protectedPaths = ['secret.env']\n" + ("gitCommits = true\n" if commits else "")
    server = sandboxed(spawn, "workspace-write", extra)
    for command, target in (
        ("echo evil > .git/hooks/pre-commit", ".git/hooks/pre-commit"),
        ("echo evil >> .git/config", ".git/config"),
        ("echo evil >> secret.env", "secret.env"),
    ):
        result = server.bash(command)
        assert result.exit_code == 1 and result.sandbox_denied, command
        assert f"denied writing {tmp_path / target};" in result.output
    head = server.bash("echo ok > .git/HEAD && cat .git/HEAD")
    assert (head.output == "ok\n") is commits
    assert head.sandbox_denied is not commits
    assert not (tmp_path / ".git" / "hooks" / "pre-commit").exists()
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"


def test_read_only_allows_only_its_private_tmp(spawn: SpawnInProcess, tmp_path: Path) -> None:
    (tmp_path / "seen.txt").write_text("visible\n")
    server = sandboxed(spawn, "read-only")
    assert server.bash("cat seen.txt").output == "visible\n"
    result = server.bash("echo x > new.txt")
    assert result.exit_code == 1 and result.sandbox_denied
    assert not (tmp_path / "new.txt").exists()
    assert server.bash("echo t > /tmp/t && cat /tmp/t").output == "t\n"


def test_a_notice_names_only_a_path_the_command_wrote(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    server = sandboxed(spawn, "read-only")
    line = "tool: stat of /x failed: Permission denied"
    result = server.bash(f"echo '{line}' >&2; false")
    assert result.exit_code == 1 and not result.sandbox_denied
    assert result.output == line + "\n"
    assert server.bash("cat /etc/shadow-nothing-here > x").sandbox_denied


def test_a_session_opened_outside_the_workspace_is_there_read_only(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("kept\n")
    server = sandboxed(spawn, "workspace-write")
    server.result("session/open", SessionOpenParams(session_id="o", cwd=str(elsewhere)))
    assert server.bash("pwd; cat notes.txt", session_id="o").output == f"{elsewhere}\nkept\n"
    assert server.bash("echo x > new.txt", session_id="o").sandbox_denied


def test_network_off_reaches_neither_the_hosts_loopback_nor_outside(
    spawn: SpawnInProcess, listener: int
) -> None:
    server = sandboxed(spawn, "workspace-write")
    assert server.bash(connect(listener)).output == "ConnectionRefusedError\n"
    # TEST-NET-1: no route at all in a namespace with loopback alone.
    assert server.bash(connect(80, "192.0.2.1")).output == "OSError\n"
    shared = sandboxed(spawn, "workspace-write", "network = true\n")
    assert shared.bash(connect(listener)).output == "connected\n"


def test_full_mode_limits_no_path_but_has_its_own_pids(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    server = sandboxed(spawn, "full")
    assert server.bash(f"echo w > {outside} && cat {outside}").output == "w\n"
    outside.unlink()
    # bwrap's init is pid 1, the shell pid 2: the host's processes are not there.
    assert server.bash("echo $$; cat /proc/1/comm").output == "2\nbwrap\n"


def test_a_request_may_tighten_the_mode_but_not_loosen_it(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    server = sandboxed(spawn, "workspace-write")
    looser = messages.SANDBOX_LOOSER.format(requested="full", configured="workspace-write")
    error = server.error("session/open", SessionOpenParams(session_id="s", sandbox="full"))
    assert error.code == ErrorCode.INVALID_PARAMS and error.data == looser
    server.result("session/open", SessionOpenParams(session_id="strict", sandbox="read-only"))
    assert server.bash("echo x > f", session_id="strict").sandbox_denied
    assert server.bash("echo x > f").exit_code == 0
    error = server.error("initialize", asking_for("off"))
    assert error.code == ErrorCode.INVALID_PARAMS
    server.result("initialize", asking_for("read-only"))
    result = call_tool(server, command="echo x > g")
    assert result.is_error and text_of(result).endswith("Command exited with code 1")
    structured = result.structured_content
    assert isinstance(structured, BashStructured) and structured.sandbox_denied
    assert "[The sandbox (read-only) denied writing" in text_of(result)
    assert not (tmp_path / "g").exists()


def test_a_later_initialize_never_loosens_the_connections_sandbox(
    server: InProcessServer, tmp_path: Path
) -> None:
    server.result("initialize", asking_for("read-only"))
    looser: SandboxMode
    for looser in ("off", "full", "workspace-write"):
        error = server.error("initialize", asking_for(looser))
        assert error.code == ErrorCode.INVALID_PARAMS
        assert error.data == messages.SANDBOX_LOOSER_THAN_CONNECTION.format(
            requested=looser, current="read-only"
        )
    # Asking for no sandbox at all keeps the one the connection has.
    server.result("initialize", asking_for())
    empty = InitializeParams(
        protocol_version=LATEST_PROTOCOL_VERSION, initialization_options=HostOptions()
    )
    server.result("initialize", empty)
    server.result("session/open", SessionOpenParams(session_id="new"))
    for session in ("new", "other"):
        assert server.bash("echo x > f", session_id=session).sandbox_denied
    assert not (tmp_path / "f").exists()


def test_a_stricter_mode_for_a_session_that_exists_restarts_its_shell_in_it(
    server: InProcessServer, tmp_path: Path
) -> None:
    outside = Path("/var/tmp") / f"bashrpc-tighten-{os.getpid()}"
    server.bash("sleep 300 &")
    server.result(
        "session/open", SessionOpenParams(session_id="default", sandbox="workspace-write")
    )
    result = server.bash(f"touch {outside}")
    assert result.exit_code != 0 and result.sandbox_denied and result.shell_restarted
    notice = messages.SANDBOX_TIGHTENED.format(mode="workspace-write")
    assert result.output.startswith(notice)
    assert not outside.exists()
    # The old shell went with what it started.
    assert wait_until(lambda: not [c for c in server.owned_commands() if "sleep 300" in c])
    assert notice not in server.bash("true").output
    # Not while a command runs there: that would leave it unconfined.
    ident = server.request("bash", BashParams(command="echo started; sleep 30", session_id="busy"))
    server.wait_for(lambda m: m.method == "bash/chunk")
    error = server.error("session/open", SessionOpenParams(session_id="busy", sandbox="read-only"))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.data == messages.SANDBOX_TIGHTEN_BUSY.format(session="busy", mode="read-only")
    # Nor an initialize that would tighten it; nothing changed, so default writes on.
    strict = asking_for("read-only")
    assert server.error("initialize", strict).code == ErrorCode.INVALID_PARAMS
    assert server.bash("echo x > f && cat f").output == "x\n"
    server.abort(session_id="busy")
    server.bash_result(ident)
    # An initialize after the sessions exist tightens them all, the tool call's too.
    call_tool(server, command="true")
    server.result("initialize", strict)
    assert server.bash("echo y > g").shell_restarted
    # (The aborted command took its shell: there was none to restart.)
    for session in ("default", "busy"):
        assert server.bash("echo y > g", session_id=session).sandbox_denied, session
    tool = call_tool(server, command="echo y > g")
    assert tool.is_error and "[The sandbox (read-only) denied writing" in text_of(tool)
    assert not (tmp_path / "g").exists()


def test_an_unsandboxed_connection_can_ask_for_a_sandbox(server: InProcessServer) -> None:
    server.result("initialize", asking_for("workspace-write"))
    structured = call_tool(server, command="touch /etc/nope").structured_content
    assert structured is not None and structured.sandbox_denied


def test_the_rc_snapshot_and_ptys_work_inside(spawn: SpawnInProcess, tmp_path: Path) -> None:
    (tmp_path / "home" / ".bashrc").write_text("alias greet='echo hello from rc'\n")
    server = sandboxed(spawn, "workspace-write")
    assert server.bash("greet").output == "hello from rc\n"
    # bwrap's own /dev shows the terminal as /dev/console; it is a terminal all the same.
    result = server.bash("tty -s && echo terminal; touch /etc/x 2>&1; greet", pty=True)
    lines = result.output.splitlines()
    assert lines[0] == "terminal" and "Read-only file system" in lines[1]
    assert lines[2] == "hello from rc"


def test_sessions_with_an_allowlist_share_one_rc_snapshot(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    """Each session's proxy has a key of its own, which nothing inside a sandbox
    sees: a new session replays the snapshot already made rather than run the rc
    again (a user's rc can take a good part of a second, per session)."""
    rc = 'eval "captured() { echo $(cat /proc/sys/kernel/random/uuid); }"\n'
    (tmp_path / "home" / ".bashrc").write_text(rc)
    extra = '[sandbox.network]\nmode = "allowlist"\nallow = ["example.org"]\n'
    server = sandboxed(spawn, "workspace-write", extra)
    captures = {server.bash("captured", session_id=f"s{i}").output for i in range(3)}
    assert len(captures) == 1 and len(captures.pop()) == 37


def test_the_servers_environment_is_out_of_reach(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    """In a sandbox, /proc is the namespace's: $PPID is bwrap's init, not the server."""
    cfg = tmp_path / "env.toml"
    cfg.write_text("[env]\nexclude = ['*TOKEN*']\n")
    server = spawn_process(
        "--config", str(cfg), "--sandbox", "workspace-write", env={"BASHRPC_TEST_TOKEN": "ghp"}
    )
    out = server.bash("echo $PPID; tr '\\0' '\\n' < /proc/$PPID/environ | grep -c TOKEN").output
    assert out == "1\n0\n"
