"""Tightening the sandbox: the one place a session is put under a stricter mode.

A session's sandbox only ever gets stricter: a command, a job or `session/open`
asking for a stricter mode, or a connection whose settings are stricter, puts
every session it reaches that is looser under it. `plan` says which (pure);
`tighten` applies it through the runtime (`Runtime.tighten`: the session's
shell closes, the next command's starts confined, its result says so). A
session running a command, whoever started it, is never changed under it: the
whole request is refused (-32602), before anything changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from bashrpc.protocol import messages
from bashrpc.protocol.methods import SandboxMode
from bashrpc.server import errors
from bashrpc.server.runtime.runtime import Runtime
from bashrpc.server.runtime.sessions.sessions import Session
from bashrpc.server.settings import stricter


def plan(modes: Mapping[str, SandboxMode], mode: SandboxMode, busy: Collection[str]) -> list[str]:
    """The sessions (of `modes`, their current modes by id) that `mode` puts under
    it, in order; refused (-32602) when one of them is `busy` (runs a command)."""
    looser = [session for session, now in modes.items() if stricter(mode, now)]
    for session in looser:
        if session in busy:
            message = messages.SANDBOX_TIGHTEN_BUSY.format(session=session, mode=mode)
            raise errors.InvalidArgument(message)
    return looser


def planned(runtime: Runtime, sessions: Sequence[Session], mode: SandboxMode) -> list[Session]:
    """The sessions `tighten` would put under `mode`, changing nothing (-32602 as there)."""
    if mode == "off":
        # Nothing is looser than no sandbox (every command asks this).
        return []
    busy = {execution.session_id for execution in runtime.executions}
    chosen = plan({s.id: s.sandbox_mode for s in sessions}, mode, busy)
    by_id = {s.id: s for s in sessions}
    return [by_id[session] for session in chosen]


def tighten(runtime: Runtime, sessions: Sequence[Session], mode: SandboxMode) -> None:
    """Put the sessions looser than `mode` under it: all or none."""
    for session in planned(runtime, sessions, mode):
        runtime.tighten(session, mode)
