"""Examples a reader copies, run as written: the host test that
docs/testing-your-host.md shows, the tutorial's host, and the README's first
exchange over stdio."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bashrpc.server.daemon import socketpath
from tests.docpages import blocks

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing-your-host.md"
TUTORIAL = PAGE.parent / "tutorial.md"
# The tutorial's one file runs in well under 10 s; this bounds a hang only.
TUTORIAL_TIMEOUT_SECONDS = 120


# The section of the testing page whose Python block is the host test; the
# page's other Python blocks (the pytest plugin's) need the plugin's fixtures.
HOST_TEST_SECTION = "## Driving it from Python"


def test_the_host_test_on_the_testing_page_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = PAGE.read_text().split(HOST_TEST_SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    (example,) = blocks(section, "python")
    # The example starts `bashrpc` from PATH, as a host's test would.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scope: dict[str, Any] = {}
    exec(compile(example, str(PAGE), "exec"), scope)
    tests = [value for name, value in scope.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0](tmp_path)


def suite_environment(tmp_path: Path) -> dict[str, str]:
    """A reader's environment, with `bashrpc` on PATH and nothing of the user's:
    no ~/.bashrc replayed, artifacts and temporary files under tmp_path."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    env["TMPDIR"] = str(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return env


def test_the_tutorial_host_prints_what_the_page_shows(tmp_path: Path) -> None:
    """The page's Python blocks, put in one file in order as it says, run by
    Python against the real `bashrpc`, print the page's `What it prints`."""
    text = TUTORIAL.read_text()
    host = tmp_path / "host.py"
    host.write_text("\n".join(blocks(text, "python")))
    shown = text.split("## What it prints\n", 1)[1]
    (expected,) = blocks(shown, "text")
    done = subprocess.run(
        [sys.executable, str(host)],
        cwd=tmp_path,
        env=suite_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=TUTORIAL_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


# Where a first exchange over stdio is shown: the document, and its section.
STDIO_EXAMPLES = [
    ("README.md", "### A host over stdio"),
    ("docs/index.md", "## A first exchange over stdio"),
]


# Far above what any shown command takes: only a hang reaches it.
SHOWN_SECONDS = 60


def run_shown(
    command: str, tmp_path: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """A command a page shows, run by bash in `tmp_path` as a reader would: HOME
    there, this checkout's `bashrpc` on PATH; it must succeed."""
    environment = {**os.environ, "HOME": str(tmp_path), **env}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        timeout=SHOWN_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize(("document", "section"), STDIO_EXAMPLES)
def test_a_first_stdio_exchange_is_what_bashrpc_answers(
    tmp_path: Path, document: str, section: str
) -> None:
    """The command line shown, run by bash, prints the lines shown."""
    text = (PAGE.parents[1] / document).read_text()
    part = text.split(section + "\n", 1)[1].split("\n#", 1)[0]
    (command,) = re.findall(r"^```sh\n(.*?)\n```", part, flags=re.M | re.S)
    (shown,) = re.findall(r"^```json\n(.*?)\n```", part, flags=re.M | re.S)
    done = run_shown(command, tmp_path, {"XDG_STATE_HOME": str(tmp_path)})
    printed = [json.loads(line) for line in done.stdout.decode().splitlines()]
    expected = [json.loads(line) for line in shown.splitlines()]
    # The example's directory is a placeholder; this run's is tmp_path.
    expected[-1]["result"]["workingDir"] = str(tmp_path)
    assert printed == expected


DAEMON_SECTION = "### The daemon"


def test_the_tours_daemon_keeps_a_shell_and_stops_as_the_readme_says(tmp_path: Path) -> None:
    """The README's daemon commands, run by bash: the second connection finds the
    first's variable, and the command shown after them stops the daemon they started."""
    text = (PAGE.parents[1] / "README.md").read_text()
    part = text.split(DAEMON_SECTION + "\n", 1)[1].split("\n#", 1)[0]
    start, stop = re.findall(r"^```sh\n(.*?)\n```", part, flags=re.M | re.S)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"XDG_RUNTIME_DIR": str(runtime), "XDG_STATE_HOME": str(tmp_path / "state")}
    socket = runtime / "bashrpc" / "daemon.sock"
    try:
        started = run_shown(start, tmp_path, env)
        assert '"output":"kept\\n"' in started.stdout.decode()
        assert socketpath.holder_pid(socket) is not None
        run_shown(stop, tmp_path, env)
        deadline = time.monotonic() + SHOWN_SECONDS
        while socketpath.holder_pid(socket) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert socketpath.holder_pid(socket) is None
    finally:
        left = socketpath.holder_pid(socket)
        if left is not None:
            os.kill(left, signal.SIGKILL)
