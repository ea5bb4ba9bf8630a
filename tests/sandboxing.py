"""Whether this machine can run the sandbox, for tests that need it."""

from __future__ import annotations

import pytest

from bashrpc.protocol import messages
from bashrpc.server.runtime.sandbox import bwrap


def skip_without_sandbox() -> None:
    """Skip, saying why, where namespaces are not permitted. A missing bwrap fails:
    it is installable (`.ci/run` installs it), so a skip would hide a setup error."""
    _, problem = bwrap.probe()
    if problem == messages.SANDBOX_NO_BWRAP:
        pytest.fail(problem)
    if problem is not None:
        pytest.skip(f"no sandbox on this machine: {problem}")
