"""The pytest plugin `bashrpc.testing`, as a Python host's project uses it: in a
fresh venv holding only this checkout (`pip install`) and pytest."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.client import ErrorReply
from bashrpc.protocol.methods import (
    ArtifactReadParams,
    BashChunk,
    BashParams,
    BashResult,
    SessionListResult,
)
from bashrpc.testing import Client
from tests.docpages import blocks
from tests.e2e.test_docs_examples import PAGE
from tests.e2e.test_transcript_cli import STATEFUL, edited

CHECKOUT = Path(__file__).resolve().parents[2]
PIP_SECONDS = 900
PYTEST_SECONDS = 600
PLUGIN_SECTION = "### For Python hosts: the pytest plugin"

HOST_TESTS = """
from pathlib import Path

from bashrpc.protocol.methods import BashResult, SessionListResult
from bashrpc.testing import verify_transcript

HERE = Path(__file__).parent


def test_the_fixture_is_a_typed_client_in_a_private_workspace(bashrpc):
    result = bashrpc.bash('echo hi; pwd; echo "$HOME"')
    assert isinstance(result, BashResult)
    assert result.output == f"hi\\n{bashrpc.workspace}\\n{bashrpc.home}\\n"
    assert bashrpc.home != Path.home()
    listed = bashrpc.call("session/list")
    assert isinstance(listed, SessionListResult)
    assert [s.session_id for s in listed.sessions] == ["default"]


def test_golden():
    verify_transcript(HERE / "golden.jsonl")


def test_broken():
    verify_transcript(HERE / "broken.jsonl")
"""


@contextlib.contextmanager
def fresh_venv() -> Iterator[Path]:
    """A venv with pytest and this checkout installed by pip, not editable: its
    dependencies once (kept in the cache), this checkout again on every run.

    Held under a lock from the install to the block's end: the venv is the
    user's cache's, and another run of the suite on the machine reinstalls its
    own checkout into it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "bashrpc-tests" / "plugin-venv"
    venv.parent.mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    ready = venv / "ready"
    pip = [str(python), "-m", "pip", "install", "-q"]
    with (venv.parent / "plugin-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            _run([sys.executable, "-m", "venv", "--clear", str(venv)])
            _run([*pip, str(CHECKOUT), "pytest"])
            ready.touch()
        else:
            _run([*pip, "--no-deps", "--force-reinstall", str(CHECKOUT)])
        yield python


def _run(argv: list[str]) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=PIP_SECONDS
    )
    assert done.returncode == 0, done.stdout + done.stderr


def run_pytest(python: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=PYTEST_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
        # Apart from this run's process group, as a host's own CI would run it.
        start_new_session=True,
    )


@pytest.mark.slow
def test_the_plugin_works_in_a_fresh_venv_with_only_bashrpc_and_pytest(tmp_path: Path) -> None:
    with fresh_venv() as python:
        check_host_project(python, tmp_path)


def page_example() -> str:
    """The testing page's example of the plugin, as a reader copies it."""
    section = PAGE.read_text().split(PLUGIN_SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    (example,) = blocks(section, "python")
    return example


def check_host_project(python: Path, tmp_path: Path) -> None:
    """A host's project of tests, run by the venv's pytest with the plugin: its
    own, and the testing page's example verbatim beside the transcript it names."""
    project = tmp_path / "host-project"
    project.mkdir()
    (project / "test_host.py").write_text(textwrap.dedent(HOST_TESTS))
    (project / "test_page_example.py").write_text(page_example())
    (project / "tests" / "golden").mkdir(parents=True)
    shutil.copyfile(STATEFUL, project / "tests" / "golden" / "edit-and-build.jsonl")
    shutil.copyfile(STATEFUL, project / "golden.jsonl")
    edited(STATEFUL, project / "broken.jsonl", {"exitCode": 7})
    done = run_pytest(python, project)
    assert "1 failed, 4 passed" in done.stdout, done.stdout + done.stderr
    assert "TranscriptMismatch" in done.stdout
    assert "request 2 (bash): result.exitCode: expected 7, got 0" in done.stdout
    where = subprocess.run(
        [str(python), "-c", "import bashrpc; print(bashrpc.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=project,
    )
    assert where.stdout.startswith(str(python.parent.parent)), where.stdout
    updated = run_pytest(python, project, "--bashrpc-update", "-k", "broken")
    assert updated.returncode == 0, updated.stdout
    again = run_pytest(python, project)
    assert again.returncode == 0, again.stdout + again.stderr


def test_loading_the_plugin_imports_nothing_of_the_server() -> None:
    probe = (
        "import sys, bashrpc.testing; "
        "print([m for m in sys.modules if m.startswith('bashrpc.') and m != 'bashrpc.testing'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_fixture_in_this_project(bashrpc: Client) -> None:
    """The plugin is installed here too (the editable install registers it)."""
    bashrpc.bash("export KEPT=yes")
    result = bashrpc.bash('echo "$KEPT"; pwd')
    assert result.output == f"yes\n{bashrpc.workspace}\n"
    chunks = bashrpc.notifications("bash/chunk", BashChunk)
    assert "".join(c.text for c in chunks) == f"yes\n{bashrpc.workspace}\n"
    assert bashrpc.call("shutdown") is None


@pytest.mark.slow
def test_reply_gives_the_result_as_the_protocols_struct(bashrpc: Client) -> None:
    """As the testing page says of `request` / `reply` / `call`."""
    ran = bashrpc.request("bash", BashParams(command="echo hi"))
    listed = bashrpc.request("session/list")
    result = bashrpc.reply(ran)
    assert isinstance(result, BashResult) and result.output == "hi\n"
    assert isinstance(bashrpc.reply(listed), SessionListResult)
    wrong = bashrpc.request("artifact/read", ArtifactReadParams(id=999))
    with pytest.raises(ErrorReply):
        bashrpc.reply(wrong)
