"""The forwarding editor that docs/background-jobs.md shows, run as written on
ACP's official TypeScript SDK: an agent on the same SDK sends its terminal calls
through it to a real `bashrpc`, which the editor translates nothing for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode, NoSuchTerminalData
from tests.docpages import blocks
from tests.node import node_packages

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "background-jobs.md"
SECTION = "## Forwarding ACP from an editor"
AGENT = Path(__file__).parent / "clients" / "acp_forwarding_agent.mjs"
# The name the agent imports the page's block by.
EDITOR = "acp_editor.mjs"
# The run takes a few seconds; this bounds a hang only.
RUN_BOUND_SECONDS = 180


class Exit(msgspec.Struct, rename="camel"):
    exit_code: int | None
    signal: str | None


class Ran(msgspec.Struct):
    exit: Exit
    output: str


class Failure(msgspec.Struct):
    """An error the agent's request ended with, as the SDK raised it."""

    code: int
    message: str
    data: NoSuchTerminalData | None


class Report(msgspec.Struct, rename="camel"):
    """What the agent saw, up to where it stopped (`raised`: what stopped it)."""

    raised: str | None
    text: Ran | None = None
    program: Ran | None = None
    killed: Exit | None = None
    # A Failure, or what became of a request that did not fail: answered, pending.
    released: Failure | str | None = None
    cancelled: Failure | str | None = None
    runs_on: Exit | None = None


def run_agent(tmp_path: Path) -> Report:
    """The agent and the page's editor in one folder of their own, where the
    installed packages resolve; `bashrpc` on PATH, HOME and state under tmp_path."""
    section = PAGE.read_text().split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    (editor,) = blocks(section, "js")
    (tmp_path / EDITOR).write_text(editor)
    (tmp_path / AGENT.name).write_bytes(AGENT.read_bytes())
    (tmp_path / "node_modules").symlink_to(node_packages() / "node_modules")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["node", AGENT.name],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return msgspec.json.decode(done.stdout, type=Report)


def test_the_pages_forwarding_editor_runs_an_sdk_agents_terminals(tmp_path: Path) -> None:
    report = run_agent(tmp_path)
    assert report.raised is None
    # Shell text the SDK sent with `args: []`, and a program with its arguments as given.
    assert report.text == Ran(Exit(0, None), "ONE TWO\n")
    assert report.program == Ran(Exit(0, None), "a b|$HOME\n")
    assert report.killed == Exit(None, "SIGKILL")
    assert isinstance(report.released, Failure)
    assert report.released.code == ErrorCode.RESOURCE_NOT_FOUND
    assert report.released.data is not None and report.released.data.terminal_id
    # The agent's cancel went on to bashrpc, whose answer came back; the job ran on.
    assert report.cancelled == Failure(
        ErrorCode.REQUEST_CANCELLED, messages.REQUEST_CANCELLED, None
    )
    assert report.runs_on is None
