"""Where a command starts (`Workdir`): resolved once, by one rule for `~` and
for relative directories, whichever runner takes the command."""

from __future__ import annotations

import pytest

from bashrpc.server.runtime.run.runners import Workdir

HOME = "/home/me"
SESSION = "/work/repo"


@pytest.mark.parametrize(
    ("cwd", "home", "given", "path"),
    [
        (None, HOME, None, SESSION),
        ("src", HOME, "src", "/work/repo/src"),
        ("../other/./x", HOME, "../other/./x", "/work/other/x"),
        ("/abs/dir/", HOME, "/abs/dir/", "/abs/dir"),
        ("~", HOME, HOME, HOME),
        ("~/proj", HOME, "/home/me/proj", "/home/me/proj"),
        # Without a HOME of its own the session's `~` is left for the shell, as data.
        ("~", None, "~", "/work/repo/~"),
        ("~/proj", None, "~/proj", "/work/repo/~/proj"),
        # Only a leading `~` is the home directory.
        ("a/~", HOME, "a/~", "/work/repo/a/~"),
    ],
)
def test_a_directory_resolves_by_one_rule(
    cwd: str | None, home: str | None, given: str | None, path: str
) -> None:
    workdir = Workdir.of(cwd, SESSION, home)
    assert (workdir.given, workdir.path) == (given, path)


@pytest.mark.parametrize(
    ("cwd", "absolute", "from_workspace"),
    [
        (None, False, "/ws"),
        ("src", False, "/ws/src"),
        ("..", False, "/"),
        ("/abs", True, "/abs"),
        ("~/proj", True, "/home/me/proj"),
    ],
)
def test_a_relative_directory_follows_a_new_shell_to_where_it_started(
    cwd: str | None, absolute: bool, from_workspace: str
) -> None:
    """A new program that could not enter the session's directory starts in the
    workspace; a relative directory is then taken from there, an absolute one as it is."""
    workdir = Workdir.of(cwd, SESSION, HOME)
    assert workdir.absolute is absolute
    assert workdir.from_base("/ws") == from_workspace
