"""The execute-only copy a sandboxed shell runs (`sealed.py`), on real files."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

import anyio
import pytest

from bashrpc.server.runtime.sandbox.sealed import EXECUTE_ONLY, Sealed


def overlay(sealed: Sealed, program: str) -> tuple[str, str] | None:
    async def made() -> tuple[str, str] | None:
        return await sealed.overlay(program)

    return anyio.run(made)


def test_a_program_is_copied_once_execute_only(tmp_path: Path) -> None:
    sealed = Sealed(tmp_path)
    made = overlay(sealed, "bash")
    bash = shutil.which("bash")
    assert made is not None and bash is not None
    copy, target = made
    assert target == os.path.realpath(bash)
    assert stat.S_IMODE(os.stat(copy).st_mode) == EXECUTE_ONLY
    assert Path(copy).parent.parent == tmp_path
    # Once per program: the same copy again.
    assert overlay(sealed, "bash") == made


def test_what_cannot_be_sealed_runs_as_it_is_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "shell.sh"
    script.write_text('#!/bin/sh\nexec bash "$@"\n')
    script.chmod(0o755)
    sealed = Sealed(tmp_path / "runtime")
    (tmp_path / "runtime").mkdir()
    with caplog.at_level(logging.WARNING):
        assert overlay(sealed, str(script)) is None
    assert "not an ELF binary" in caplog.text and str(script) in caplog.text
    assert overlay(sealed, str(tmp_path / "missing")) is None
