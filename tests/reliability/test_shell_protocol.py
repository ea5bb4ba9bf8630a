"""The shell protocol against the command: a persistent shell's status record is
the server's only word on where a command ended, so the command must not be
able to write one. Each case runs the real server over stdio, with and without
the sandbox, and tries every descriptor the command has (bash keeps some of
its own under saved numbers, `>&10`), then the status FIFO by its path."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from bashrpc.protocol.methods import BashParams, SessionCloseParams, SessionOpenParams
from tests.conftest import SpawnInProcess, SpawnProcess
from tests.rpc import ServerProcess, wait_until
from tests.sandboxing import skip_without_sandbox

# A bound that only catches a hang: `echo hi` answers in milliseconds.
RESPONSIVE_SECONDS = 10.0
JUNK_BYTES = 10 * 1024 * 1024
EVERY_FD = "for fd in {3..255}; do WRITE >&$fd; done 2>/dev/null; echo ran"
# What an old driver's record looked like, for an exit 7 in `/`.
FORGED = EVERY_FD.replace("WRITE", "printf '\\0%s\\0%s\\0%s\\0%s\\0' 7 / hB ''")
# A record whose fields are not numbers, with a sixth field for good measure.
MALFORMED = EVERY_FD.replace("WRITE", "printf 'x\\0y\\0z\\0w\\0v\\0u\\0'")
# No NUL at all: the record never ends, and must not be re-read on every read.
JUNK = EVERY_FD.replace("WRITE", f"printf '%{JUNK_BYTES}s' ''")


@pytest.fixture(params=["off", "workspace-write"])
def server(request: pytest.FixtureRequest, spawn_process: SpawnProcess) -> ServerProcess:
    if request.param != "off":
        skip_without_sandbox()
    process: ServerProcess = spawn_process("--sandbox", request.param)
    return process


def test_no_descriptor_reaches_the_status_channel(server: ServerProcess, tmp_path: Path) -> None:
    server.result("session/open", SessionOpenParams(session_id="other"))
    assert server.bash("echo hi", session_id="other").output == "hi\n"
    for command in (FORGED, MALFORMED, JUNK):
        ident = server.request("bash", BashParams(command=command))
        # Meanwhile another session answers at once.
        started = time.monotonic()
        assert server.bash("echo hi", session_id="other").output == "hi\n"
        assert time.monotonic() - started < RESPONSIVE_SECONDS
        result = server.bash_result(ident, timeout=60)
        # (What reached the output is the loop's own stderr, saved at fd 11.)
        assert result.exit_code == 0 and result.output.endswith("ran\n"), command[:60]
        assert result.working_dir == str(tmp_path)
        assert not result.shell_restarted
    # The session's own shell is still the one it had.
    assert server.bash("echo $$", session_id="other").exit_code == 0
    for session in ("default", "other"):
        server.result("session/close", SessionCloseParams(session_id=session))
    assert wait_until(lambda: server.owned_processes() == [])


def test_a_record_written_by_path_kills_only_that_shell(server: ServerProcess) -> None:
    server.result("session/open", SessionOpenParams(session_id="other"))
    server.bash("echo up", session_id="other")
    server.bash("sleep 300 &")
    # The FIFO's path is no secret; the command's token is, so its record is forged.
    forged = server.bash(
        "printf '\\0%s\\0%s\\0%s\\0%s\\0%s\\0' 7 / hB '' 0123 > \"${__bashrpc_sfifo}\"; sleep 300"
    )
    assert forged.exit_code != 7 and forged.exit_code is not None, forged
    assert forged.working_dir != "/" and forged.shell_restarted
    again = server.bash("echo back")
    assert again.output == "back\n" and not again.shell_restarted
    assert server.bash("echo hi", session_id="other").output == "hi\n"
    # The shell died with all it started: `sleep 300` twice.
    assert wait_until(lambda: not [c for c in server.owned_commands() if "sleep" in c])


def test_the_token_is_nowhere_the_command_can_read(spawn: SpawnInProcess) -> None:
    """Not in a variable, the environment, the fields file, bash's command line or
    history, nor in what `set -v` and `set -x` print to a stderr the command took."""
    server = spawn()
    # A DEBUG trap runs between the driver's steps too (outside the command's
    # redirections): there it takes the shell's own stderr for good.
    server.bash("trap 'exec 2>>\"$HOME/trace\"' DEBUG; set -vx -o history")
    server.bash("echo between")
    traced = server.bash('cat "$HOME/trace"').output
    looked = server.bash(
        'history; declare -p; env; tr "\\0" "\\n" </proc/$$/cmdline </proc/$$/environ;'
        ' tr "\\0" "\\n" <"$__bashrpc_in"'
    ).output
    # What was looked at holds the driver's text, and its trace.
    assert "__bashrpc_line=" in looked, looked
    assert "set +vx +o history" in traced, traced
    # 32 hex digits, but for the test run's own variables (xdist's run id).
    found = set(re.findall(r"[0-9a-f]{32}", traced + looked)) - set(os.environ.values())
    assert found == set()
