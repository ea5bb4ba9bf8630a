"""What a sandboxed command leaves in its root for the git guard to find at the
next shell's start: a pointer (`gitdir:`, `commondir`) naming a directory out of
its reach, and a planted file (a FIFO, a `/dev/zero` link, a sparse gigabyte)
where git expects a small one. Real bwrap and git, the host as root and as
uid 65534: the next shell neither binds nor writes what a pointer names
outside the roots, and starts at once, with `timeout` and `abort_bash` working.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import BashParams
from tests.githost import Host, host
from tests.memory import rss_bytes
from tests.rpc import ServerProcess, wait_until
from tests.sandboxing import skip_without_sandbox

__all__ = ["host"]

COMMITS = "gitCommits = true\n"
MODES = ("read-only", "workspace-write")
# Generous: a planted FIFO once kept the next shell from ever starting.
START_SECONDS = 20.0
# What the server may grow by over a shell's start on planted files (a `/dev/zero`
# index once grew it by a gigabyte).
GROWTH_BYTES = 10 * 1024 * 1024


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


def plain(host: Host) -> Path:
    """A writable root that is not a repository, owned by the host's user."""
    root = host.base / "plain"
    host.write(root / "README", "")
    return root


def leave(host: Host, root: Path, command: str, mode: str) -> ServerProcess:
    """`command` run in a workspace-write shell on `root`, which then exits; the
    server whose next shell starts on what it left: that one, or a fresh one in
    `mode`."""
    attacker = host.serve(root, "workspace-write")
    done = attacker.bash(f"{command}; exit")
    assert done.exit_code == 0, done.output
    return attacker if mode == "workspace-write" else host.serve(root, mode)


# -- finding 1: with commits, a gitlink's `.git` file naming a host directory --


def test_a_gitlink_checkout_naming_a_host_directory(host: Host) -> None:
    """The checkout of a gitlink added to the (writable) index names a directory
    outside the roots: nothing is made in it, and it is not bound writable."""
    repo = host.repo("repo")
    victim = host.base / "victim"
    host.write(victim / "kept", "")
    victim.chmod(0o700)
    server = host.serve(repo, "workspace-write", COMMITS)
    planted = server.bash(
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),evil && "
        f"mkdir evil && printf 'gitdir: {victim}\\n' > evil/.git; exit"
    )
    assert planted.exit_code == 0, planted.output
    reply = server.call("bash", BashParams(command=f"echo pwned > {victim}/NEW"))
    assert sorted(p.name for p in victim.iterdir()) == ["kept"], reply


def test_a_git_file_naming_another_repository(host: Host) -> None:
    """In a root that is not a repository, a `.git` file naming another repository:
    the next shell cannot commit onto its branch, nor is anything made in it."""
    root = plain(host)
    other = host.repo("other")
    head = host.ok(other, "rev-parse", "HEAD")
    before = sorted(p.name for p in (other / ".git").iterdir())
    server = host.serve(root, "workspace-write", COMMITS)
    server.bash(f"printf 'gitdir: {other}/.git\\n' > .git; exit")
    server.call("bash", BashParams(command="git commit -q --allow-empty -m inside"))
    assert host.ok(other, "rev-parse", "HEAD") == head
    assert sorted(p.name for p in (other / ".git").iterdir()) == before


# -- finding 2: a pointer binds a host directory into the next shell --------

POINTERS = {
    "gitdir": "printf 'gitdir: {target}\\n' > .git",
    "commondir": "git init -q . && echo {target} > .git/commondir",
}


@pytest.mark.parametrize("pointer", sorted(POINTERS))
@pytest.mark.parametrize("mode", MODES)
def test_a_pointer_at_the_hosts_tmp(host: Host, mode: str, pointer: str) -> None:
    """A directory of the host's /tmp, hidden by the sandbox's own, stays hidden."""
    root = plain(host)
    secret = host.base / "secret"
    host.write(secret / "token", "")
    server = leave(host, root, POINTERS[pointer].format(target=secret), mode)
    seen = server.bash(f"ls {secret} 2>&1")
    assert "token" not in seen.output
    # Where the guard scans (a writable root), the result says what it did not follow.
    assert ("git guard: " in seen.output) is (mode == "workspace-write"), seen.output


@pytest.mark.parametrize("pointer", sorted(POINTERS))
@pytest.mark.parametrize("mode", MODES)
def test_a_pointer_at_the_hosts_proc(host: Host, mode: str, pointer: str) -> None:
    """The host's /proc, with every host process in it, is not bound over the
    sandbox's own."""
    root = plain(host)
    server = leave(host, root, POINTERS[pointer].format(target="/proc"), mode)
    seen = server.bash(f"test -e /proc/{os.getpid()} && echo host-proc || echo own")
    assert seen.output.endswith("own\n") and "host-proc" not in seen.output
    assert ("git guard: " in seen.output) is (mode == "workspace-write"), seen.output


# -- finding 3: a planted file where git expects a small one ----------------

PLANTS = {
    "fifo": "mkfifo {path}",
    "zero": "ln -s /dev/zero {path}",
    "sparse": "truncate -s 1G {path}",
}
PLANTED_NAMES = ("index", "HEAD", "config", "commondir")


@pytest.mark.parametrize("name", PLANTED_NAMES)
@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("mode", MODES)
def test_a_planted_file_stalls_nothing(host: Host, mode: str, plant: str, name: str) -> None:
    """The next shell starts, its timeout fires and an abort is answered; the
    server grows by less than 10 MB."""
    root = plain(host)
    path = f".git/{name}"
    planted = PLANTS[plant].format(path=path)
    server = leave(host, root, f"git init -q . && rm -f {path} && {planted}", mode)
    began = time.monotonic()
    # Told what the guard did, if anything (a gigabyte config keeps the root read-only).
    assert server.bash("echo started", wait=START_SECONDS).output.endswith("started\n")
    assert time.monotonic() - began < START_SECONDS
    before = rss_bytes(server.server_pid)
    # Each command below starts a shell of its own, on the same planted file.
    timed = server.bash("sleep 60; exit", wait=START_SECONDS, timeout=1)
    assert timed.timed_out
    server.bash("exit", wait=START_SECONDS)
    ident = server.request("bash", BashParams(command="sleep 60"))
    assert wait_until(server.abort, START_SECONDS)
    assert server.bash_result(ident, START_SECONDS).cancelled
    assert rss_bytes(server.server_pid) - before < GROWTH_BYTES
    # And it exits at its input's end.
    assert server.close(START_SECONDS) == 0


# -- no command denies every later shell on its root ------------------------

DENIALS = {
    "a FIFO .git": "mkfifo .git",
    "a .git linked to nothing": "ln -s x .git",
    "a .git linked to a device": "ln -s /dev/zero .git",
}


@pytest.mark.parametrize("planted", sorted(DENIALS))
def test_a_planted_git_denies_no_later_shell(host: Host, planted: str) -> None:
    """Once a refusal of every later shell, until a person removed the file: the
    next shell starts, its root writable."""
    root = plain(host)
    server = leave(host, root, DENIALS[planted], "workspace-write")
    done = server.bash("touch made && echo ok", wait=START_SECONDS)
    assert done.output == "ok\n" and (root / "made").exists()


def test_a_missing_include_in_a_repository_a_command_made(host: Host) -> None:
    """What only the root could keep keeps it read-only for the shell, which
    starts, its result saying why; nothing the include names gets made."""
    root = plain(host)
    server = leave(
        host, root, "git init -q . && git config include.path ../conf/x", "workspace-write"
    )
    done = server.bash("mkdir conf", wait=START_SECONDS)
    what = messages.GIT_GUARD_NAMED.format(path=root / "conf" / "x", reason="include.path")
    assert messages.GIT_GUARD_SEALED.format(root=root, what=what) in done.output
    assert done.exit_code != 0 and not (root / "conf").exists()
    # A program on a terminal starts a sandbox of its own: its result says it too.
    on_pty = server.bash("mkdir conf", wait=START_SECONDS, pty=True)
    assert messages.GIT_GUARD_SEALED.format(root=root, what=what) in on_pty.output
    assert not (root / "conf").exists()
