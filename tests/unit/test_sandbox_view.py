"""What a new sandbox shows, and what it binds (pure): a shell's directory is never
a bind source, and nothing is bound over the sandbox's own /tmp, /proc and /dev."""

from __future__ import annotations

import pytest

from bashrpc.server.runtime.sandbox import mounts
from bashrpc.server.runtime.sandbox.mounts import policy, showable
from bashrpc.server.runtime.seam.policy import Policy

WORKSPACE = "/work/app"


def make(mode: str, opened_in: str | None = None) -> Policy:
    made = policy(
        mode,  # type: ignore[arg-type]
        network=False,
        workspace=WORKSPACE,
        writable_roots=(),
        protected_paths=(),
        opened_in=opened_in,
    )
    assert made is not None
    return made


def binds(argv: list[str]) -> list[str]:
    """Every bind's destination, in order, less the protected paths inside the roots."""
    options = ("--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind")
    found = [argv[i + 2] for i, a in enumerate(argv) if a in options]
    return [path for path in found if "/.git/" not in path]


@pytest.mark.parametrize("cwd", ["/", "/tmp", "/tmp/x", "/proc", "/dev", "/etc"])
def test_the_directory_a_shell_starts_in_is_never_bound(cwd: str) -> None:
    for mode in ("workspace-write", "read-only"):
        argv = mounts.argv(make(mode), ["bash"], cwd=cwd, bwrap="bwrap")
        assert binds(argv) == ["/", WORKSPACE] and argv[-4:] == ["--chdir", cwd, "--", "bash"]


def test_a_directory_the_host_opened_is_shown_before_the_roots() -> None:
    made = make("workspace-write", opened_in="/work")
    assert made.shown == ("/work",)
    # First, so the writable workspace below it is not covered read-only.
    assert binds(mounts.argv(made, ["bash"], cwd="/work", bwrap="bwrap")) == [
        "/",
        "/work",
        WORKSPACE,
    ]
    assert not mounts.allows_write(made, "/work/notes") and mounts.allows_write(
        made, f"{WORKSPACE}/a"
    )
    assert make("workspace-write", opened_in=f"{WORKSPACE}/src").shown == ()


@pytest.mark.parametrize(
    ("directory", "shown"),
    [
        ("/", False),
        ("/tmp", False),
        ("/proc", False),
        ("/dev", False),
        ("/proc/1/root", False),
        ("/dev/shm", False),
        ("/tmp/project", True),
        ("/srv/data", True),
        ("/devices", True),
    ],
)
def test_what_may_be_shown(directory: str, shown: bool) -> None:
    assert showable(directory) is shown
    assert make("read-only", opened_in=directory).shown == ((directory,) if shown else ())


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("/", True),
        ("/etc", True),
        ("/tmp", True),
        ("/proc", True),
        ("/dev", True),
        ("/tmp/mine", False),
        ("/proc/4242", False),
        ("/dev/shm", False),
        (WORKSPACE, True),
        (f"{WORKSPACE}/src", True),
        ("/tmp/opened/sub", True),
    ],
)
def test_what_a_new_sandbox_keeps(path: str, kept: bool) -> None:
    assert mounts.keeps(make("workspace-write", opened_in="/tmp/opened"), path) is kept


def test_full_mode_keeps_all_but_its_own_proc() -> None:
    full = make("full")
    assert mounts.keeps(full, "/tmp/mine") and mounts.keeps(full, "/proc")
    assert not mounts.keeps(full, "/proc/4242")
