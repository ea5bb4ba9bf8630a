"""What every sandbox hides of the server's own (a daemon's socket directory and
token files), in every mode, without covering what the sandbox binds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server.runtime.sandbox import mounts
from bashrpc.server.runtime.seam.policy import Policy


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    yield
    mounts.hide_in_every_sandbox(mounts.Hidden())


def argv(mode: SandboxMode, workspace: Path) -> list[str]:
    policy = Policy(mode, True, (str(workspace),), ())
    return mounts.argv(policy, ["bash"], cwd=str(workspace), bwrap="bwrap")


def pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, arg in enumerate(args) if arg == flag]


def daemon_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    sockets, secret = tmp_path / "run", tmp_path / "token"
    sockets.mkdir()
    (sockets / "daemon.sock").touch()
    secret.write_text("t")
    return sockets, sockets / "daemon.sock", secret


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full"])
def test_the_socket_directory_is_an_empty_tmpfs_and_a_token_is_null(
    tmp_path: Path, mode: SandboxMode
) -> None:
    sockets, sock, secret = daemon_files(tmp_path)
    gone = tmp_path / "gone"
    files = (str(sock), str(secret), str(gone))
    mounts.hide_in_every_sandbox(mounts.Hidden((str(sockets),), files))
    args = argv(mode, tmp_path / "ws")
    tmpfs = [args[i + 1] for i, arg in enumerate(args) if arg == "--tmpfs"]
    assert str(sockets) in tmpfs
    # The socket is under the tmpfs already; a file gone from the host is left out.
    assert pairs(args, "--ro-bind")[-1:] == [("/dev/null", str(secret))]
    assert str(gone) not in args
    assert args.index(str(sockets)) < args.index("--chdir")


def test_a_directory_that_holds_the_workspace_hides_its_files_alone(tmp_path: Path) -> None:
    sockets, sock, secret = daemon_files(tmp_path)
    workspace = sockets / "ws"
    workspace.mkdir()
    mounts.hide_in_every_sandbox(mounts.Hidden((str(sockets),), (str(sock), str(secret))))
    args = argv("workspace-write", workspace)
    assert str(sockets) not in args
    assert ("/dev/null", str(sock)) in pairs(args, "--ro-bind")
    assert ("/dev/null", str(secret)) in pairs(args, "--ro-bind")


def test_nothing_is_hidden_where_nothing_was_asked(tmp_path: Path) -> None:
    args = argv("workspace-write", tmp_path)
    assert "/dev/null" not in args
