from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rpc import ServerProcess


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp=tmp_path)
    try:
        yield proc
        assert proc.garbage == [], "non-protocol lines on stdout"
    finally:
        proc.kill()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[object]:
    """Start servers with custom arguments; all are killed at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, **kwargs: object) -> ServerProcess:
        proc = ServerProcess(*args, tmp=tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.kill()
