"""Background jobs on an in-process server: bounds that need many jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalListParams,
    TerminalListResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
)
from bashrpc.server.runtime.jobs.jobtable import MAX_EXITED_KEPT
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer
from tests.rpc import wait_until

BOUND_SECONDS = 60.0
RC = "alias greet='echo hello from the rc'\n"
PREFIX = "prefix = 'FROM_PREFIX=set'\n"
SANDBOXES = {"off": "", "workspace-write": '[sandbox]\nmode = "workspace-write"\n'}


def listing(server: InProcessServer) -> TerminalListResult:
    return server.typed(TerminalListResult, "terminal/list", TerminalListParams())


def finished_output(server: InProcessServer, params: TerminalCreateParams) -> str:
    """The whole output of a job started with `params`, once it has exited."""
    job = server.typed(TerminalCreateResult, "terminal/create", params).terminal_id
    ident = TerminalParams(session_id=params.session_id, terminal_id=job)
    waited = server.typed(TerminalWaitResult, "terminal/wait_for_exit", ident)
    assert waited.exit_code == 0
    asked = TerminalOutputParams(session_id=params.session_id, terminal_id=job)
    return server.typed(TerminalOutputResult, "terminal/output", asked).output


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_shell_text_replays_the_rc_and_the_prefix_a_program_runs_as_given(
    spawn: SpawnInProcess, tmp_path: Path, sandbox: str
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text(RC)
    server = spawn(PREFIX + SANDBOXES[sandbox])
    # The prefix goes before the text, as a PTY command's: its first command sees it.
    text = TerminalCreateParams(session_id="rc", command="env | grep -c ^FROM_PREFIX=set$; greet")
    assert finished_output(server, text) == "1\nhello from the rc\n"
    # A program with arguments: no shell, no rc, no prefix.
    program = TerminalCreateParams(session_id="rc", command="echo", args=["greet", "$HOME"])
    assert finished_output(server, program) == "greet $HOME\n"


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
