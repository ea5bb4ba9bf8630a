"""The directories of one recorded or replayed run, and the paths they hide.

A replay (and the pytest plugin's server) runs in a fresh temporary root of
its own: a workspace (a copy of a fixture directory, or empty), HOME, the
artifacts root, TMPDIR and the XDG directories, so nothing of the machine's,
or of an earlier run's, leaks in: run 2's `artifact/read {"id":1}` reads run 2's
artifact. A recording runs where its host put it; `recorded_paths` names its
directories for the placeholders.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from bashrpc.protocol import placeholders
from bashrpc.server.cli.fixture import copy_fixture
from bashrpc.server.output.artifactroot import default_root, workspace_key

# Flags naming a run's own paths: a header leaves them out, replay gives its own.
PATH_FLAGS = ("--workspace", "--cwd", "--artifacts-dir", "--socket")
DAEMON_BRIDGE = "attach"


def flag_value(args: list[str], flag: str) -> str | None:
    """The last value given for `flag` (`--flag V` or `--flag=V`)."""
    found = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def portable_args(args: list[str]) -> list[str]:
    """The server arguments without the flags that name a run's own paths."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in PATH_FLAGS:
            skip = True
        elif not arg.startswith(tuple(f + "=" for f in PATH_FLAGS)):
            kept.append(arg)
    return kept


# What a header's server arguments may hold without --trust: the server or the
# daemon bridge, and options that cannot loosen the sandbox or reach a file.
SAFE_COMMANDS = ("serve", DAEMON_BRIDGE)
SAFE_FLAGS = (
    "--sandbox",
    "--max-line-bytes",
    "--client-timeout",
    "--drain-seconds",
    "--log-level",
    "--on-eof",
)
LOOSEST_SANDBOX = "off"


def untrusted_arg(args: list[str]) -> str | None:
    """The first of a header's server arguments that only a trusted transcript
    may hold (a config file, `--sandbox off`, another command), or None."""
    rest = portable_args(args)
    if rest[:1] and rest[0] in SAFE_COMMANDS:
        rest = rest[1:]
    while rest:
        flag, has_value, value = rest[0].partition("=")
        if flag not in SAFE_FLAGS or (not has_value and len(rest) < 2):
            return rest[0]
        if not has_value:
            value = rest[1]
        shown = rest[0] if has_value else f"{flag} {value}"
        if flag == "--sandbox" and value == LOOSEST_SANDBOX:
            return shown
        rest = rest[1 if has_value else 2 :]
    return None


def _variants(path: str | Path) -> list[str]:
    """A path as given and as resolved (a symlinked /tmp prints either)."""
    absolute = os.path.abspath(path)
    return sorted({absolute, os.path.realpath(absolute)})


def paths_for(workspace: Path, artifacts_root: Path, home: str, tmp: str) -> placeholders.Paths:
    pairs: list[tuple[str, str]] = []
    for path, holder in (
        (artifacts_root / workspace_key(workspace), placeholders.ARTIFACTS),
        (artifacts_root, placeholders.ARTIFACTS_ROOT),
        (workspace, placeholders.WORKSPACE),
        (home, placeholders.HOME),
        (tmp, placeholders.TMP),
    ):
        pairs += [(variant, holder) for variant in _variants(path)]
    return pairs


def recorded_paths(args: list[str]) -> placeholders.Paths:
    """The directories a recorded server uses, as its arguments and environment say."""
    workspace = Path(flag_value(args, "--workspace") or flag_value(args, "--cwd") or os.getcwd())
    root = flag_value(args, "--artifacts-dir")
    artifacts = Path(root) if root else default_root()
    home = os.environ.get("HOME") or str(Path.home())
    return paths_for(workspace.resolve(), artifacts, home, tempfile.gettempdir())


class RunRoot:
    """A fresh temporary root: workspace, home, artifacts, tmp; removed by `remove`."""

    def __init__(self, fixture: Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bashrpc-run-")).resolve()
        self.workspace = self.root / "workspace"
        if fixture is not None:
            try:
                copy_fixture(fixture, self.workspace)
            except BaseException:
                self.remove()
                raise
        else:
            self.workspace.mkdir()
        self.home = self.root / "home"
        self.artifacts = self.root / "artifacts"
        self.tmp = self.root / "tmp"
        for directory in (self.home, self.tmp, self.root / "state", self.root / "config"):
            directory.mkdir()
        self.socket = self.tmp / "daemon" / "daemon.sock"

    def argv(self, server_args: list[str]) -> list[str]:
        """The server's command line: its arguments, then this run's paths."""
        own = ["--workspace", str(self.workspace), "--artifacts-dir", str(self.artifacts)]
        if server_args[:1] == [DAEMON_BRIDGE]:
            own += ["--socket", str(self.socket)]
        return [sys.executable, "-m", "bashrpc", *portable_args(server_args), *own]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            HOME=str(self.home),
            TMPDIR=str(self.tmp),
            XDG_STATE_HOME=str(self.root / "state"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_RUNTIME_DIR=str(self.tmp),
        )
        return env

    def paths(self) -> placeholders.Paths:
        return paths_for(self.workspace, self.artifacts, str(self.home), str(self.tmp))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
