"""Editors and pagers in commands without a terminal end at once, through the real
`bashrpc`: the editors with a clear message (the stand-ins first on PATH and named
by EDITOR and the like), the pagers as `cat`, whatever the user's rc defines."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import BashToolArguments, CallToolResult
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.server.runtime.seam import noterminal
from tests.conftest import SpawnProcess
from tests.rpc import ServerProcess

pytestmark = pytest.mark.slow

# Far beyond an editor's stand-in (a shell script) and far below the 300 s a
# waiting vim took: each command is given this timeout, and must not reach it.
BOUND_SECONDS = 30.0


def needs(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (.ci/run installs them)")


def said(program: str) -> str:
    return messages.NO_TERMINAL.format(program=program)


def run(server: ServerProcess, command: str) -> tuple[str, int | None, float]:
    started = time.monotonic()
    result = server.bash(command, timeout=BOUND_SECONDS, wait=2 * BOUND_SECONDS)
    assert not result.timed_out, (command, result.output)
    return result.output, result.exit_code, time.monotonic() - started


@pytest.mark.parametrize("editor", ["vim", "vi", "view", "nano", "emacs -nw", "nvim"])
def test_an_editor_without_a_terminal_fails_at_once(
    process: ServerProcess, tmp_path: Path, editor: str
) -> None:
    needs(editor.split()[0])
    (tmp_path / "notes.txt").write_text("kept\n")
    output, code, _ = run(process, f"{editor} notes.txt")
    assert output == said(editor.split()[0]) + "\n" and code == 1
    assert (tmp_path / "notes.txt").read_text() == "kept\n"


def test_programs_that_run_the_editor_get_the_clear_failure(
    process: ServerProcess, tmp_path: Path
) -> None:
    needs("git", "crontab")
    output, code, _ = run(process, "git init -q repo && cd repo && git commit --allow-empty")
    assert said("editor") in output and code != 0
    output, code, _ = run(process, "git -c core.editor=vim commit --allow-empty")
    assert said("editor") in output and code != 0
    output, code, _ = run(process, 'echo "$EDITOR|$VISUAL|$SUDO_EDITOR|$GIT_SEQUENCE_EDITOR"')
    assert output == "|".join([noterminal.EDITOR] * 4) + "\n"


def test_whatever_the_rc_defines(spawn_process: SpawnProcess, tmp_path: Path) -> None:
    needs("git", "vim")
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / ".bashrc").write_text(
        "export EDITOR=vim VISUAL=vim GIT_EDITOR=vim PATH=/usr/bin:/bin\n"
        "alias vim=/usr/bin/vim\n"
        'vi() { /usr/bin/vim "$@"; }\n'
    )
    server = spawn_process()
    output, code, _ = run(server, "vim a.txt; vi b.txt")
    assert output == said("vim") + "\n" + said("vi") + "\n" and code == 1
    output, code, _ = run(server, "git init -q r && cd r && git commit --allow-empty")
    assert said("editor") in output and code != 0


def test_a_scripted_editor_still_runs(process: ServerProcess, tmp_path: Path) -> None:
    needs("vim")
    (tmp_path / "f.txt").write_text("one\n")
    output, code, _ = run(process, "vim -es -c 's/one/two/' -c wq f.txt && cat f.txt")
    assert (output, code) == ("two\n", 0)


@pytest.mark.parametrize("pager", ["less", "more", "man"])
def test_pagers_without_a_terminal_print_and_end(
    process: ServerProcess, tmp_path: Path, pager: str
) -> None:
    needs(pager)
    (tmp_path / "long.txt").write_text("".join(f"line {i}\n" for i in range(500)))
    target = "ls" if pager == "man" else "long.txt"
    output, code, _ = run(process, f"{pager} {target}")
    assert code == 0
    assert ("line 499" in output) if pager != "man" else ("ls" in output and "NAME" in output)


def test_an_editor_in_a_tool_call_returns_at_once(process: ServerProcess) -> None:
    needs("vim")
    call = bash_tool_call(BashToolArguments(command="vim x.txt", timeout=BOUND_SECONDS))
    result = process.typed(CallToolResult, "tools/call", call, 2 * BOUND_SECONDS)
    assert said("vim") in result.text and result.is_error


def test_an_editor_on_a_terminal_is_the_real_one(process: ServerProcess, tmp_path: Path) -> None:
    needs("vim")
    (tmp_path / "f.txt").write_text("on a terminal\n")
    result = process.bash("vim -u NONE -c q f.txt; echo rc=$?", pty=True, timeout=BOUND_SECONDS)
    assert said("vim") not in result.output and "rc=0" in result.output
