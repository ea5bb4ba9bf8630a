"""Sandbox escapes through git: a confined command (workspace-write, real bwrap, as
root) tries to plant what the host's git runs later, a `core.fsmonitor` or a hook;
then the host's own `git status` and `git commit` run, and must run nothing.

Each vector is tried with the sandbox `off` first: there it plants, so the check
below can see a planted payload when one gets through."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SpawnInProcess
from tests.e2e.test_sandbox import asking_for, sandboxed
from tests.e2e.test_tools import call_tool, text_of
from tests.sandboxing import skip_without_sandbox

# What a planted fsmonitor or hook does on the host: make this file in the test's dir.
MARKER = "planted"


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


def host_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The host's git, with no system or user config of the machine's."""
    home = repo.parent / "home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "host",
        "GIT_AUTHOR_EMAIL": "host@example.com",
        "GIT_COMMITTER_NAME": "host",
        "GIT_COMMITTER_EMAIL": "host@example.com",
    }
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "agent@example.com"),
        ("config", "user.name", "agent"),
        ("commit", "-q", "--allow-empty", "-m", "first"),
    ):
        done = host_git(path, *args)
        assert done.returncode == 0, done.stderr
    return path


def payload(marker: Path) -> str:
    return f"touch {marker}; false"


def hooks(marker: Path) -> str:
    """Shell text defining `plant FILE`: an executable hook there that runs the payload."""
    return f"plant() {{ printf '%s\\n' '#!/bin/sh' 'touch {marker}' > \"$1\"; chmod +x \"$1\"; }}; "


def planted(repo: Path, marker: Path, *dirs: str) -> bool:
    """Whether the host's `git status` and `git commit`, in `repo` and `dirs` in it,
    ran anything planted."""
    for directory in (".", *dirs):
        host_git(repo / directory, "status")
        host_git(repo / directory, "commit", "-q", "--allow-empty", "-m", "host")
    return marker.exists()


def attack(spawn: SpawnInProcess, repo: Path, mode: str, command: str) -> str:
    server = sandboxed(spawn, mode, workspace=repo)
    result = server.bash(command)
    return result.output


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_a_renamed_git_dir_and_a_fresh_one(
    spawn: SpawnInProcess, tmp_path: Path, mode: str
) -> None:
    """6: `mv .git .git-old` and a fresh `.git` with a chosen config."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / MARKER
    command = (
        "mv .git .git-old; git init -q .; "
        f"git config core.fsmonitor '{payload(marker)}'; "
        "git config user.email a@example.com; git config user.name a"
    )
    output = attack(spawn, repo, mode, command)
    assert planted(repo, marker) is (mode == "off"), output
    if mode != "off":
        assert "Device or resource busy" in output
        assert (repo / ".git").is_dir() and not (repo / ".git-old").exists()


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_a_commondir_pointed_at_a_planted_copy(
    spawn: SpawnInProcess, tmp_path: Path, mode: str
) -> None:
    """7: `.git/commondir` naming a copy of the git dir with a planted config."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / MARKER
    command = (
        "cp -r .git copy; "
        f"git --git-dir=copy config core.fsmonitor '{payload(marker)}'; "
        'rm -f .git/commondir; echo "$PWD/copy" > .git/commondir'
    )
    output = attack(spawn, repo, mode, command)
    assert planted(repo, marker) is (mode == "off"), output
    if mode != "off":
        # The placeholder stays, naming the git dir itself: the host's git works.
        assert (repo / ".git" / "commondir").read_text() == ".\n"
        assert host_git(repo, "log", "--oneline").stdout.count("host") == 1


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_a_hooks_symlink_replaced_by_a_directory(
    spawn: SpawnInProcess, tmp_path: Path, mode: str
) -> None:
    """8: `.git/hooks` a symlink to a tracked `.githooks/`: the command replaces the
    link with a directory of its own, or writes the link's target."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / MARKER
    (repo / ".githooks").mkdir()
    shutil.rmtree(repo / ".git" / "hooks")
    (repo / ".git" / "hooks").symlink_to("../.githooks")
    command = (
        f"{hooks(marker)} plant .githooks/post-commit; "
        "rm -rf .git/hooks; mkdir .git/hooks; plant .git/hooks/pre-commit"
    )
    output = attack(spawn, repo, mode, command)
    assert planted(repo, marker) is (mode == "off"), output
    if mode != "off":
        assert (repo / ".git" / "hooks").is_symlink()
        assert list((repo / ".githooks").iterdir()) == []


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_a_submodules_config_and_hooks(spawn: SpawnInProcess, tmp_path: Path, mode: str) -> None:
    """9: a submodule's `.git/modules/<name>/config` and hooks, written in place or
    in a fresh `modules/` after moving the old one aside; and its checkout's `.git`
    file pointed at a planted copy, in place or in a fresh checkout."""
    library = make_repo(tmp_path / "library")
    repo = make_repo(tmp_path / "repo")
    # Two: the second's way down through `modules/` must not uncover the first's pins.
    for name in ("lib", "zlib"):
        added = host_git(repo, "submodule", "add", "-q", str(library), name)
        assert added.returncode == 0, added.stderr
    marker = tmp_path / MARKER
    module = ".git/modules/lib"
    command = (
        f"git --git-dir={module} config core.fsmonitor '{payload(marker)}'; "
        f"{hooks(marker)} plant {module}/hooks/pre-commit; "
        f"mv .git/modules .git/moved && cp -r .git/moved .git/modules && "
        f"git --git-dir={module} config core.fsmonitor '{payload(marker)}'; "
        f"cp -r {module} planted; git config --file planted/config core.worktree $PWD/lib; "
        f"git config --file planted/config core.fsmonitor '{payload(marker)}'; "
        'echo "gitdir: $PWD/planted" > lib/.git; '
        'mv lib lib-old; mkdir -p lib; echo "gitdir: $PWD/planted" > lib/.git'
    )
    output = attack(spawn, repo, mode, command)
    assert planted(repo, marker, "lib") is (mode == "off"), output


def test_git_add_commit_and_checkout_work_inside(spawn: SpawnInProcess, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    server = sandboxed(spawn, "workspace-write", workspace=repo)
    result = server.bash(
        "echo a > a.txt && git add a.txt && git commit -q -m inside && "
        "git checkout -q -b topic && git rev-parse --abbrev-ref HEAD"
    )
    assert result.output == "topic\n" and result.exit_code == 0
    log = host_git(repo, "log", "--format=%s", "topic")
    assert log.stdout.split() == ["inside", "first"]
    assert host_git(repo, "status", "--porcelain").stdout == ""


def test_a_linked_worktree_workspace(spawn: SpawnInProcess, tmp_path: Path) -> None:
    """10: a workspace whose `.git` is a file starts its shell, and commits there,
    while its `.git` file and its git dir's pointers stay as they are."""
    main = make_repo(tmp_path / "main")
    worktree = tmp_path / "worktree"
    added = host_git(main, "worktree", "add", "-q", "-b", "side", str(worktree))
    assert added.returncode == 0, added.stderr
    pointer = (worktree / ".git").read_text()
    marker = tmp_path / MARKER
    server = sandboxed(spawn, "workspace-write", workspace=worktree)
    result = server.bash("echo b > b.txt && git add b.txt && git commit -q -m in-worktree")
    assert result.exit_code == 0, result.output
    # The tool-call surface's shell starts too (it answered -32603 ShellDied).
    server.result("initialize", asking_for())
    tool = call_tool(server, command="git rev-parse --abbrev-ref HEAD")
    assert not tool.is_error and text_of(tool).startswith("side")
    assert host_git(main, "log", "--format=%s", "side").stdout.split()[0] == "in-worktree"
    admin = main / ".git" / "worktrees" / "worktree"
    command = (
        f"echo 'gitdir: {tmp_path}/elsewhere' > .git; "
        f"echo {tmp_path}/elsewhere > {admin}/commondir; "
        f"git config --worktree core.fsmonitor '{payload(marker)}'; "
        f"echo '[core]fsmonitor = {payload(marker)}' > {admin}/config.worktree"
    )
    output = server.bash(command).output
    assert (worktree / ".git").read_text() == pointer
    assert (admin / "commondir").read_text() == "../..\n"
    host_git(main, "config", "extensions.worktreeConfig", "true")
    assert not planted(worktree, marker), output


# What the host's config names in the workspace, and how the command rewrites it.
CONFIG_NAMED = {
    "hooksPath": (
        ("core.hooksPath", ".husky/_"),
        "{hooks} plant .husky/_/pre-commit; mv .husky .moved; mkdir -p .husky/_; "
        "plant .husky/_/pre-commit",
    ),
    "include": (
        ("include.path", "../team.gitconfig"),
        "printf '[core]\\n\\tfsmonitor = {payload}\\n' >> team.gitconfig",
    ),
    "program in the hooks": (
        ("core.fsmonitor", ".git/hooks/fsmonitor-watchman"),
        "{hooks} plant .git/hooks/pre-commit",
    ),
    "program": (
        ("core.fsmonitor", "./tools/fsmonitor"),
        "{hooks} plant tools/fsmonitor; rm -f tools/fsmonitor; plant tools/fsmonitor",
    ),
}


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
@pytest.mark.parametrize("named", sorted(CONFIG_NAMED))
def test_what_the_config_names_in_the_workspace(
    spawn: SpawnInProcess, tmp_path: Path, mode: str, named: str
) -> None:
    """The config is read-only, but what it names in the workspace must be too: a
    hooks directory not made yet (husky's before its install), an included config
    file, a command's program."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / MARKER
    (key, value), command = CONFIG_NAMED[named]
    (repo / "team.gitconfig").write_text("")
    (repo / "tools").mkdir()
    for program in (repo / "tools" / "fsmonitor", repo / ".git" / "hooks" / "fsmonitor-watchman"):
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    assert host_git(repo, "config", key, value).returncode == 0
    text = command.format(hooks=hooks(marker), payload=payload(marker))
    output = attack(spawn, repo, mode, text)
    assert planted(repo, marker) is (mode == "off"), output
