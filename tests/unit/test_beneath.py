"""The host side's walk to what a sandboxed command could have written: no link in
a root followed, `..` taken as the kernel takes it, nothing but a small regular
file read, and nothing that blocks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bashrpc.server.runtime.sandbox import beneath
from bashrpc.server.runtime.sandbox.beneath import Hostile


def test_steps_keep_dot_dot_as_a_step() -> None:
    assert beneath.steps("/w/app", "../lib/.git") == ("w", "app", "..", "lib", ".git")
    assert beneath.steps("/w/app", "/srv//x/./y") == ("srv", "x", "y")


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A root, with a directory and a link in it; and a directory outside it."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "real" / "sub").mkdir(parents=True)
    (outside / "sub").mkdir(parents=True)
    (root / "link").symlink_to(outside)
    (root / "inner").symlink_to(root / "real")
    return root, outside


def test_a_link_in_a_root_is_not_followed(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    roots = [str(root)]
    assert beneath.directory("real/sub", roots, str(root)) == str(root / "real/sub")
    assert beneath.directory("link", roots, str(root)) is None
    assert beneath.directory("inner/sub", roots, str(root)) is None
    # `..` after a link is the link's target's parent to the kernel: refused, not
    # taken lexically as `real`.
    assert beneath.directory("link/../real", roots, str(root)) is None
    # Out of the root by `..`: walked as the kernel walks it.
    assert beneath.directory("../outside/sub", roots, str(root)) == str(outside / "sub")


def test_a_link_outside_every_root_is_the_hosts(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    host_link = outside.parent / "host-link"
    host_link.symlink_to(root / "real")
    assert beneath.directory(str(host_link / "sub"), [str(root)]) == str(root / "real/sub")
    # Not when the link is in a root: outside them, nothing limits it.
    assert beneath.directory(str(root / "link" / "sub"), []) == str(outside / "sub")


def test_only_a_small_regular_file_is_read(tmp_path: Path) -> None:
    roots = [str(tmp_path)]
    (tmp_path / "file").write_bytes(b"gitdir: x\n")
    assert beneath.read(str(tmp_path / "file"), roots, 64) == b"gitdir: x\n"
    assert beneath.read(str(tmp_path / "missing"), roots, 64) is None
    assert beneath.read(str(tmp_path / "missing-dir" / "file"), roots, 64) is None
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    with open(tmp_path / "sparse", "wb") as sparse:
        sparse.truncate(1 << 30)
    (tmp_path / "dir").mkdir()
    for name in ("fifo", "zero", "to-file", "sparse", "dir"):
        with pytest.raises(Hostile):
            beneath.read(str(tmp_path / name), roots, 64)


def test_a_hosts_link_to_a_file_is_followed(tmp_path: Path) -> None:
    (tmp_path / "dotfiles").mkdir()
    (tmp_path / "dotfiles" / "gitconfig").write_text("[core]\n")
    (tmp_path / ".gitconfig").symlink_to(tmp_path / "dotfiles" / "gitconfig")
    assert beneath.read(str(tmp_path / ".gitconfig"), [], 64) == b"[core]\n"
    # Where the link is in a root, it could be a command's: not followed.
    with pytest.raises(Hostile):
        beneath.read(str(tmp_path / ".gitconfig"), [str(tmp_path)], 64)
