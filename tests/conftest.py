"""Fixtures: a real server in-process (`server`, `spawn`) for protocol behaviour,
and the real `bashrpc` process, run as `python -m bashrpc` (`process`,
`spawn_process`), for what needs one: stdio, signals, stdin EOF, the subreaper,
the CLI."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bashrpc.server.runtime.containment import child
from tests.daemon import AttachProcess
from tests.inprocess import InProcessServer, environment
from tests.rpc import SUITE_ENV, ServerProcess

SpawnInProcess = Callable[..., InProcessServer]
SpawnProcess = Callable[..., ServerProcess]


@pytest.fixture
def spawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SpawnInProcess]:
    """In-process servers with settings (TOML text) and environment variables of
    their own; all stopped at teardown. Their shells see a private, empty HOME."""
    started: list[InProcessServer] = []
    for name, value in environment(tmp_path).items():
        monkeypatch.setenv(name, value)

    def start(
        settings: str = "", env: dict[str, str] | None = None, workspace: Path | None = None
    ) -> InProcessServer:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        server = InProcessServer(tmp=tmp_path, settings=settings, workspace=workspace)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
        assert [s.garbage for s in started if s.garbage] == [], "non-protocol lines"


@pytest.fixture
def server(spawn: SpawnInProcess) -> InProcessServer:
    return spawn()


# The stdio suite runs against `bashrpc attach` too (a daemon behind a bridge): to a
# host the two must be the same. A case about one process itself (its pid, its
# signals, its own stdio fds) is marked `stdio_only` with the reason.
BOTH_TRANSPORTS = (
    "e2e/test_stdio.py",
    "e2e/test_lifecycle.py",
    "reliability/test_faults.py",
    "reliability/test_hostile_input.py",
)
TRANSPORTS = ("stdio", "attach")


def pytest_configure(config: pytest.Config) -> None:
    # What the suite starts gets default signals, as the server gives its
    # commands, whatever the suite's parent left it (`test_suite_signals.py`).
    child.clear_inherited_signals()
    # Inherited by every worker and all they start, so that what another run of
    # the suite beside this one starts is told apart (`rpc.marked_processes`).
    os.environ.setdefault(SUITE_ENV, uuid.uuid4().hex)
    config.addinivalue_line(
        "markers", "stdio_only(reason): about the stdio server's own process, not attach"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" not in metafunc.fixturenames:
        return
    path = metafunc.definition.path.as_posix()
    if path.endswith(BOTH_TRANSPORTS) and not metafunc.definition.get_closest_marker("stdio_only"):
        metafunc.parametrize("transport", TRANSPORTS, indirect=True)


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> str:
    """How process fixtures reach the server: "stdio", or "attach" (a daemon behind
    `bashrpc attach`) for the modules that run against both."""
    return str(getattr(request, "param", TRANSPORTS[0]))


@pytest.fixture
def spawn_process(tmp_path: Path, transport: str) -> Iterator[SpawnProcess]:
    """Server processes with custom arguments (over `bashrpc attach` for the
    "attach" transport); all killed at teardown."""
    started: list[ServerProcess] = []
    kind = AttachProcess if transport == "attach" else ServerProcess

    def start(*args: str, **kwargs: object) -> ServerProcess:
        proc = kind(*args, tmp=tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.kill()


@pytest.fixture
def process(spawn_process: SpawnProcess) -> Iterator[ServerProcess]:
    proc = spawn_process()
    yield proc
    assert proc.garbage == [], "non-protocol lines on stdout"


# Most cases wait (on shells, timeouts, kill graces) more than they compute, so
# three workers per core keep the cores busy; on 2 cores six beat four by about
# a tenth. More than that, each worker's start (importing and collecting the
# suite) costs more than the waiting it hides.
WORKERS_PER_CORE = 3
MAX_WORKERS = 12


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return min(MAX_WORKERS, WORKERS_PER_CORE * len(os.sched_getaffinity(0)))


# Fixtures that start the real server as a process of its own (`host`: tests/githost.py).
PROCESS_FIXTURES = frozenset({"process", "spawn_process", "host"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A case that starts a server process is slow. Starting and stopping one
    takes about 0.3 s and a quarter of a CPU-second (an interpreter, the
    server's imports, its rc capture); an in-process server takes 15 ms. The
    modules whose cases start processes by hand are marked as a whole.

    Slow cases go first: the workers take them on at the start, side by side,
    instead of one worker finishing a long case while the others sit idle.
    """
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
