"""Where the runtime directory is made: TMPDIR, else the user's runtime dir, else /dev/shm."""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bashrpc.server import rundir


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A private directory as XDG_RUNTIME_DIR is, and a shared one as /dev/shm is."""
    private = tmp_path / "xdg"
    private.mkdir()
    private.chmod(0o700)
    shared = tmp_path / "shm"
    shared.mkdir()
    shared.chmod(0o1777)
    return private, shared


def test_tmpdir_set_is_the_users_choice(places: tuple[Path, Path], tmp_path: Path) -> None:
    private, shared = places
    env = {"TMPDIR": str(tmp_path), "XDG_RUNTIME_DIR": str(private)}
    assert rundir.base(env, str(shared)) == tempfile.gettempdir()


def test_the_users_private_runtime_directory_comes_first(places: tuple[Path, Path]) -> None:
    private, shared = places
    assert rundir.base({"XDG_RUNTIME_DIR": str(private)}, str(shared)) == str(private)


def test_a_runtime_directory_others_may_enter_is_passed_over(places: tuple[Path, Path]) -> None:
    private, shared = places
    private.chmod(0o755)
    assert rundir.base({"XDG_RUNTIME_DIR": str(private)}, str(shared)) == str(shared)


def test_a_shared_directory_without_the_sticky_bit_is_passed_over(
    places: tuple[Path, Path],
) -> None:
    _, shared = places
    shared.chmod(0o777)
    assert rundir.base({}, str(shared)) == tempfile.gettempdir()
    assert rundir.base({}, str(shared / "missing")) == tempfile.gettempdir()


def test_a_noexec_mount_is_passed_over(tmp_path: Path) -> None:
    """A /dev/shm mounted noexec (as Docker's is) would not run the sealed shell:
    a tmpfs mounted so, in a mount namespace of its own, is refused."""
    shm = tmp_path / "shm"
    shm.mkdir()
    check = (
        "import sys; from bashrpc.server import rundir; "
        f"print(rundir.base({{}}, {str(shm)!r}) == {str(shm)!r})"
    )
    run_check = f"{sys.executable} -c {shlex.quote(check)}"

    def mount(opts: str) -> str:
        return f"mount -t tmpfs -o {opts},mode=1777 none {shm}"

    answers = []
    for opts in ("noexec", "exec"):
        proc = subprocess.run(
            ["unshare", "-r", "-m", "sh", "-c", f"{mount(opts)} && {run_check}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            pytest.skip(f"no mount namespace here: {proc.stderr.strip()}")
        answers.append(proc.stdout.strip())
    assert answers == ["False", "True"]


def test_made_private_in_its_base(places: tuple[Path, Path]) -> None:
    private, _ = places
    made = Path(rundir.make({"XDG_RUNTIME_DIR": str(private)}))
    assert made.parent == private and made.name.startswith("bashrpc-")
    assert made.stat().st_mode & 0o777 == 0o700
