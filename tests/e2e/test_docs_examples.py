"""The host test that docs/testing-your-host.md shows, run as written: an
example a reader copies must pass."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing-your-host.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def test_the_host_test_on_the_testing_page_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = python_blocks(PAGE.read_text())
    # The example starts `bashrpc` from PATH, as a host's test would.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scope: dict[str, Any] = {}
    exec(compile(example, str(PAGE), "exec"), scope)
    tests = [value for name, value in scope.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0](tmp_path)
