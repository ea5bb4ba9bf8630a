"""The local backend: shells and PTY programs are processes of this machine
(in a bubblewrap sandbox when the session has one), and the filesystem the
services ask about is this one's.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping

from bashrpc.server.runtime.containment import procs
from bashrpc.server.runtime.pty.pty import PtyRun
from bashrpc.server.runtime.sandbox import bwrap
from bashrpc.server.runtime.sandbox.sandbox import Policy
from bashrpc.server.runtime.sandbox.startlog import StartLog
from bashrpc.server.runtime.seam.backend import (
    BackendSetup,
    DirKind,
    PtyHandle,
    PtySpec,
    PtyStartFailed,
)
from bashrpc.server.runtime.seam.shelltypes import ShellConfig
from bashrpc.server.runtime.shell.shell import Shell

_pty_names = itertools.count(1)


class LocalBackend:
    def __init__(self, setup: BackendSetup) -> None:
        self._dir = setup.runtime_dir
        self._containment = setup.containment

    def shell(self, config: ShellConfig, env: Mapping[str, str], cwd: str, name: str) -> Shell:
        shell = Shell(config, env, cwd, self._dir, name, self._containment.tracker(name))
        if config.sandbox is not None:
            # bwrap's stderr: read by the pool for as long as bwrap and the shell hold it.
            shell.start_log = StartLog()
        return shell

    async def pty(self, spec: PtySpec) -> PtyHandle:
        # Before the tracker: a sandbox that cannot start fails with nothing made.
        launch = await bwrap.wrap(
            spec.argv,
            spec.sandbox,
            cwd=spec.cwd,
            read_only_files=list(spec.read_only_files),
            new_session=False,
            runtime_dir=str(self._dir),
        )
        tracker = self._containment.tracker(f"pty{next(_pty_names)}")
        run = PtyRun(
            launch.argv,
            pass_fds=launch.pass_fds,
            cwd=spec.cwd,
            env={**spec.env, procs.OWNER_ENV: tracker.tag},
            cols=spec.cols,
            rows=spec.rows,
            on_output=spec.feed,
            tracker=tracker,
            start_log=StartLog() if spec.sandbox is not None else None,
        )
        try:
            run.start()
        except Exception as exc:  # ptyprocess re-raises the child's error as any type
            if run.start_log is not None:
                run.start_log.close()
            tracker.release()
            raise PtyStartFailed(str(exc)) from None
        finally:
            launch.close()
        return run

    def directory(self, path: str) -> DirKind:
        if os.path.isdir(path):
            return "dir"
        return "other" if os.path.exists(path) else "missing"

    def can_enter(self, directory: str, sandbox: Policy | None) -> bool:
        """Inside a sandbox, only a directory it shows as the host has it (or one of
        its own mounts): symlinks are followed on the host, so a link to an
        earlier shell's private /tmp does not pass."""
        if not os.path.isdir(directory):
            return False
        return sandbox is None or (
            sandbox.keeps(directory) and sandbox.keeps(os.path.realpath(directory))
        )

    def home(self, env: Mapping[str, str] | None) -> str | None:
        return (os.environ if env is None else env).get("HOME")
