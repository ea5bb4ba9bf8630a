"""A bare CR starts its line over on pipes as on a PTY: the same cases, both ways."""

from __future__ import annotations

import pytest

from tests.carriagereturns import CASES
from tests.inprocess import InProcessServer


def printf_of(data: bytes) -> str:
    """A command that writes exactly these bytes."""
    return "printf '" + "".join(f"\\{byte:03o}" for byte in data) + "'"


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
def test_carriage_returns_fold_alike(server: InProcessServer, pty: bool) -> None:
    for data, expected in CASES:
        result = server.bash(printf_of(data), pty=pty)
        assert (data, result.output) == (data, expected)
