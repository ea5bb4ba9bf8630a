"""The host's side of the git guard's tests: a user (root, or nobody), a
directory of theirs, their own git, and real `bashrpc` servers run as them.

A planted `core.fsmonitor` or hook, run later by the host's `git status` or
`git commit`, makes the marker file: `planted` says whether one got through."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bashrpc.protocol.envelope import ErrorObject
from bashrpc.protocol.methods import BashParams, BashResult
from tests.rpc import ServerProcess, error_of, ok_result

NOBODY = 65534
USERS = ("root", "nobody")
MARKER = "planted"
# How the server is started as nobody: setpriv execs the venv's interpreter, whose
# link a preexec_fn's exec may not follow into root's home.
AS_NOBODY = ("setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups")
GIT_SECONDS = 60
IDENTITY = {
    "GIT_AUTHOR_NAME": "host",
    "GIT_AUTHOR_EMAIL": "host@example.com",
    "GIT_COMMITTER_NAME": "host",
    "GIT_COMMITTER_EMAIL": "host@example.com",
}


def as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def runs_as_nobody(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, preexec_fn=as_nobody, capture_output=True, cwd="/")
    except OSError:
        return False
    return done.returncode == 0


def nobody_interpreter() -> tuple[str, ...]:
    """How uid 65534 runs this suite's Python with its packages: the interpreter
    itself where that user may run it, else the system's of the same version
    (a pyenv build under a private /root is not) with the packages' directory."""
    if runs_as_nobody([sys.executable, "-c", "import bashrpc"]):
        return (sys.executable,)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/local/bin:/usr/bin")
    site = sysconfig.get_paths()["purelib"]
    # `-m bashrpc ARGS` follows: run that module with ARGS, once its packages are there.
    boot = (
        f"import runpy, site, sys; site.addsitedir({site!r}); sys.argv[1:3] = []; "
        "runpy.run_module('bashrpc', run_name='__main__', alter_sys=True)"
    )
    if system is None or not runs_as_nobody([system, "-c", boot, "-m", "bashrpc", "--version"]):
        pytest.skip(f"no {version} that uid 65534 may run with this suite's packages")
    return (system, "-c", boot)


class Host:
    """One user's machine, as far as the tests go: `base` is theirs, with a HOME
    (and XDG config) of its own that their git and their servers share."""

    def __init__(self, user: str, base: Path) -> None:
        self.user = user
        self.base = base
        self.home = base / "home"
        self.marker = base / MARKER
        self.servers: list[ServerProcess] = []
        for directory in (self.home, base / "config"):
            directory.mkdir()
        self._own(base)

    def _own(self, path: Path) -> None:
        if self.user == "nobody":
            for directory, _, files in os.walk(path):
                for name in (directory, *(os.path.join(directory, f) for f in files)):
                    os.lchown(name, NOBODY, NOBODY)

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.base / "config"),
            "GIT_CONFIG_NOSYSTEM": "1",
        }

    def run(self, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        """A command of the host user's (not in any sandbox)."""
        return subprocess.run(
            argv,
            cwd=cwd,
            env={**self.env, **IDENTITY},
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=False,
            preexec_fn=as_nobody if self.user == "nobody" else None,
        )

    def git(self, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(["git", "-c", "protocol.file.allow=always", *args], repo)

    def ok(self, repo: Path, *args: str) -> str:
        done = self.git(repo, *args)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def repo(self, name: str, base: Path | None = None) -> Path:
        path = (base or self.base) / name
        path.mkdir(parents=True)
        self._own(path)
        self.ok(path, "init", "-q", "-b", "main")
        self.ok(path, "config", "user.email", "agent@example.com")
        self.ok(path, "config", "user.name", "agent")
        self.ok(path, "commit", "-q", "--allow-empty", "-m", "first")
        return path

    def write(self, path: Path, text: str, mode: int = 0o644) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
        if self.user == "nobody":
            for made in (path, *path.relative_to(self.base).parents):
                os.lchown(self.base / made, NOBODY, NOBODY)

    def serve(
        self,
        workspace: Path,
        mode: str,
        settings: str = "",
        env: dict[str, str] | None = None,
        *,
        interpreter: tuple[str, ...] = (sys.executable,),
    ) -> ServerProcess:
        """A server of this user's, sandboxed in `mode`; `interpreter`: what runs
        `-m bashrpc` (a launcher module of the tests' before it)."""
        config = self.base / f"settings-{len(self.servers)}.toml"
        config.write_text(f'[sandbox]\nmode = "{mode}"\n{settings}')
        config.chmod(0o644)
        server = ServerProcess(
            "--config",
            str(config),
            "--workspace",
            str(workspace),
            tmp=self.base,
            env={"GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
            cwd=workspace,
            launcher=AS_NOBODY if self.user == "nobody" else (),
            interpreter=interpreter,
        )
        self.servers.append(server)
        return server

    def attack(
        self, workspace: Path, mode: str, command: str, settings: str = ""
    ) -> BashResult | ErrorObject:
        """`command` run in a shell of a server on `workspace`: its result, or the
        error that refused the shell."""
        server = self.serve(workspace, mode, settings)
        reply = server.call("bash", BashParams(command=command))
        return ok_result(reply, BashResult) if reply.error is None else error_of(reply)

    def planted(self, repo: Path, *dirs: str) -> bool:
        """Whether the host's `git status` and `git commit`, in `repo` and `dirs` in
        it, ran anything planted."""
        for directory in (".", *dirs):
            self.git(repo / directory, "status")
            self.git(repo / directory, "commit", "-q", "--allow-empty", "-m", "host")
        return self.marker.exists()

    def payload(self) -> str:
        return f"touch {self.marker}; false"

    def hooks(self) -> str:
        """Shell text defining `plant FILE`: an executable hook there making the marker."""
        return (
            f"plant() {{ printf '%s\\n' '#!/bin/sh' 'touch {self.marker}' > \"$1\";"
            ' chmod +x "$1"; }; '
        )

    def stop(self) -> None:
        for server in self.servers:
            server.kill()


@contextmanager
def host_as(user: str, parent: str | None = None) -> Iterator[Host]:
    """A host of `user` (root, or nobody), its directory made under `parent`
    (the temporary directory by default), removed at the end."""
    if user == "nobody" and os.geteuid() != 0:
        pytest.skip("only root can run the host as uid 65534")
    base = Path(tempfile.mkdtemp(prefix="bashrpc-git-", dir=parent))
    base.chmod(0o755)
    made = Host(user, base)
    try:
        yield made
    finally:
        made.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=USERS)
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    """The host as root, and as nobody (uid 65534), each with a directory of its
    own under /tmp (pytest's own is root's alone)."""
    with host_as(request.param) as made:
        yield made
