"""Where the runtime directory is made: TMPDIR, else the user's runtime dir, else /dev/shm."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bashrpc.server import rundir
from bashrpc.server.runtime.containment.watchdog import remove_runtime_dir


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


NOBODY = 65534


def test_a_dead_daemons_runtime_directory_goes_with_its_unlisted_shell_directories() -> None:
    """A shell's own directory is unlisted (0300) while it runs; a daemon's sit one
    level down, under their tenant's (t1/s1). After a SIGKILL, the watchdog (the
    server's user) removes what is left: every level. Root lists any directory, so
    as root the removal runs as uid 65534, over a tree that user owns."""
    base = Path(tempfile.mkdtemp(prefix="bashrpc-removal-", dir="/var/tmp"))
    try:
        base.chmod(0o1777)  # as /tmp and /dev/shm are
        runtime = base / "bashrpc-x"
        for shell in (runtime / "t1" / "s1", runtime / "s2"):
            shell.mkdir(parents=True)
            (shell / f"{shell.name}.in").write_text("a command's text and env values\n")
        removal = (
            "from pathlib import Path\n"
            "from bashrpc.server.runtime.containment.watchdog import remove_runtime_dir\n"
            f"remove_runtime_dir(Path({str(runtime)!r}))\n"
        )
        launcher: list[str] = []
        if os.geteuid() == 0:
            for path in (runtime, *runtime.rglob("*")):
                os.chown(path, NOBODY, NOBODY)
            launcher = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY)]
            launcher += ["--clear-groups"]
        for shell in (runtime / "t1" / "s1", runtime / "s2"):
            shell.chmod(0o300)
        subprocess.run([*launcher, sys.executable, "-c", removal], check=True, timeout=60)
        assert not runtime.exists(), sorted(str(p) for p in runtime.rglob("*"))
    finally:
        for path in (base, *base.rglob("*")):
            if path.is_dir():
                path.chmod(0o700)
        shutil.rmtree(base)


# Swaps two entries of a directory, again and again, until killed: a command of
# the user's (the sandbox off) racing the removal of a dead server's directory.
_SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
AT_FDCWD = -100
first, second = (os.fsencode(p) for p in sys.argv[1:3])
print("swapping", flush=True)
while True:
    libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)
"""
# Other shells' directories beside the swapped one: the removal takes a while
# over them, which is the swapper's window. Before the mend, more than half of
# the trials had a directory elsewhere opened up (0700).
SIBLINGS = 100
SWAP_TRIALS = 20


def _pause(swapper: subprocess.Popen[str]) -> None:
    """The swapper stopped (SIGSTOP), so the test's own steps race nothing."""
    swapper.send_signal(signal.SIGSTOP)
    stat = Path(f"/proc/{swapper.pid}/stat")
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "T":
        time.sleep(0.001)


def _open_up(runtime: Path) -> None:
    """The test's own tree made removable again (the swapper paused or gone)."""
    for path in (runtime, *runtime.iterdir()):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o700)


def test_the_removal_follows_no_link_swapped_in_for_a_directory(tmp_path: Path) -> None:
    """Between the listing of a directory and the change of its mode, an entry
    swapped for a link to a directory elsewhere: that directory's mode stays."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "inner").mkdir(parents=True)
    runtime = tmp_path / "bashrpc-x"
    shell, link = runtime / "shell", runtime / "link"
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(shell), str(link)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        for _ in range(SWAP_TRIALS):
            _pause(swapper)
            for path in (elsewhere, elsewhere / "inner"):
                path.chmod(0o500)
            if runtime.exists():
                # What the swaps kept from the last removal.
                _open_up(runtime)
                shutil.rmtree(runtime)
            runtime.mkdir()
            for directory in (shell, *(runtime / f"s{i}" for i in range(SIBLINGS))):
                directory.mkdir(0o300)
            link.symlink_to(elsewhere)
            swapper.send_signal(signal.SIGCONT)
            remove_runtime_dir(runtime)
            modes = [oct(path.stat().st_mode & 0o777) for path in (elsewhere, elsewhere / "inner")]
            assert modes == ["0o500", "0o500"]
    finally:
        swapper.kill()
        swapper.wait()
        for path in (elsewhere, elsewhere / "inner"):
            path.chmod(0o700)
        if runtime.exists():
            _open_up(runtime)
