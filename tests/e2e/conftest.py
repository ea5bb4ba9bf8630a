"""Fixtures of the cases that run `bashrpc daemon`: a daemon of the case's own
(`daemon`), and a socket path whose daemon, if one was started behind a
bridge (`bashrpc attach`), is stopped at teardown (`socket_path`)."""

from __future__ import annotations

from collections.abc import Iterator
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
