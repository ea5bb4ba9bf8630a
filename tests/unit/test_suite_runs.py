"""Two runs of the suite on one machine use the same process markers: each counts
only what is its own, or what carries no run's token at all (`env -i`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.rpc import SUITE_ENV, cmdline, marked_processes, wait_until

# Only a hang could take this long.
START_BOUND_SECONDS = 30.0
MARKER = "suite-runs-mark"

Started = list[subprocess.Popen[bytes]]


@pytest.fixture
def started() -> Iterator[Started]:
    processes: Started = []
    yield processes
    for process in processes:
        process.kill()
        process.wait()


def start_marked(started: Started, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A process with this environment, once its command line carries `name`."""
    process = subprocess.Popen(["bash", "-c", f"exec -a {name} sleep 300"], env=env)
    started.append(process)
    assert wait_until(lambda: name in cmdline(process.pid), START_BOUND_SECONDS)
    return process


def test_another_runs_marked_process_is_not_ours(started: Started) -> None:
    ours = start_marked(started, f"{MARKER}-a", dict(os.environ))
    start_marked(started, f"{MARKER}-b", {**os.environ, SUITE_ENV: "another run"})
    assert marked_processes(f"{MARKER}-a") == [ours.pid]
    assert marked_processes(f"{MARKER}-b") == []


def test_a_marked_process_without_a_token_still_counts(started: Started) -> None:
    bare = start_marked(started, f"{MARKER}-c", {"PATH": os.environ["PATH"]})
    assert marked_processes(f"{MARKER}-c") == [bare.pid]
