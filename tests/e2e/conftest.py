"""Fixtures of the cases that run `bashrpc daemon`: a daemon of the case's own
(`daemon`), daemons started with arguments of the case's (`spawn_daemon`), and a
socket path whose daemon, if one was started behind a bridge (`bashrpc
attach`), is stopped at teardown (`socket_path`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.daemon import DaemonProcess, fresh_socket, stop_daemon


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp=tmp_path)
    try:
        yield process.wait_listening()
    finally:
        process.kill()


@pytest.fixture
def socket_path(tmp_path: Path) -> Iterator[Path]:
    path = fresh_socket(tmp_path)
    yield path
    stop_daemon(path)


SpawnDaemon = Callable[..., DaemonProcess]


@pytest.fixture
def spawn_daemon(tmp_path: Path) -> Iterator[SpawnDaemon]:
    """`bashrpc daemon ARGS...` (on a socket of its own unless given one, with extra
    environment `env`), each killed at teardown."""
    started: list[DaemonProcess] = []

    def start(
        *args: str, socket_path: Path | None = None, env: dict[str, str] | None = None
    ) -> DaemonProcess:
        daemon = DaemonProcess(*args, tmp=tmp_path, socket_path=socket_path, env=env)
        started.append(daemon)
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            daemon.kill()
