"""The host's `bash`, as a command request (`request.py`): `planned` makes the
spec from the params (or a background job), the command service runs it while
`listener` streams `bash/chunk` (or `pty/output` on a PTY), and `finish`
makes the result. Commands run exactly as given.
"""

from __future__ import annotations

import base64
import functools
from typing import Any

import msgspec

from bashrpc.protocol import paths
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashChunk, BashParams, BashResult, PtySize
from bashrpc.server.services import bashjobs, secrets
from bashrpc.server.services.commands import CommandSpec, Terminal, clamp_timeout, terminal
from bashrpc.server.services.jobs import JobService
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.request import Background, Command, Planned
from bashrpc.server.services.resumable import Logged
from bashrpc.server.services.streams import (
    ListenerFactory,
    Notify,
    command_streams,
    input_emitter,
    raw_emitter,
)
from bashrpc.server.settings import Settings


def _noticed(chunk: msgspec.Struct, notice: str) -> msgspec.Struct:
    """A replayed chunk opening with what the replay missed (in its exact bytes too)."""
    assert isinstance(chunk, BashChunk)
    exact = chunk.text_base64
    if exact is not None:
        exact = base64.b64encode(notice.encode() + base64.b64decode(exact)).decode("ascii")
    return msgspec.structs.replace(chunk, text=notice + chunk.text, text_base64=exact)


# What a `bash` request's record keeps: its chunks (a replay that lost its start
# says so in the first one kept), or on a PTY its raw bytes (the gap in seq
# tells, and `pty/screen` shows the screen now).
ON_PIPES = Logged(frozenset({"bash/chunk"}), on_gap=_noticed)
ON_PTY = Logged(frozenset({"pty/output"}))


def pty_terminal(params: BashParams) -> Terminal | None:
    """The PTY the command asks for, within limits; None: pipes."""
    if not params.pty:
        return None
    size = params.pty if isinstance(params.pty, PtySize) else PtySize()
    return terminal(size.cols, size.rows)


def plan(params: BashParams, *, request_id: Any, settings: Settings) -> CommandSpec:
    secrets.check_opt_out(settings, params.redact)
    return CommandSpec(
        command=params.command,
        session_id=params.session_id,
        cwd=params.cwd,
        timeout=None if params.timeout is None else clamp_timeout(params.timeout),
        max_bytes=settings.output.max_bytes,
        request_id=request_id,
        env=params.env or {},
        terminal=pty_terminal(params),
        sandbox=settings.sandbox.mode,
        one_shot=params.one_shot,
        secret_env=tuple(params.secret_env or ()),
        redact=params.redact,
    )


def bash_chunk(
    request_id: RequestId | None, session_id: str, seq: int, text: str, skipped: int
) -> BashChunk:
    """A chunk of the stream's text, whose bytes that are not UTF-8 (lone
    surrogates) go exact in `textBase64` and as U+FFFD in `text`."""
    shown, exact = paths.to_wire(text)
    return BashChunk(
        request_id=request_id,
        session_id=session_id,
        seq=seq,
        text=shown,
        text_base64=exact,
        skipped=skipped,
    )


def planned(
    params: BashParams, *, request_id: Any, settings: Settings, terminals: JobService
) -> Planned[BashResult]:
    """A `bash` request: a command, or with `background` a job."""
    if bashjobs.wanted(params):
        start = functools.partial(bashjobs.run, terminals, params, settings)
        return Background("bash", params.session_id, start, kept=lambda result: result)
    spec = plan(params, request_id=request_id, settings=settings)
    return Command(
        spec,
        "bash",
        lambda notify: listener(notify, spec),
        finish,
        lambda outcome, result: result,
        logged=ON_PIPES if spec.terminal is None else ON_PTY,
        holds_lane=True,
    )


def listener(notify: Notify, spec: CommandSpec) -> ListenerFactory:
    """Chunks (or a PTY's bytes) to the connection."""
    request_id, session_id = spec.request_id, spec.session_id

    async def emit_chunk(seq: int, text: str, skipped: int) -> None:
        await notify("bash/chunk", bash_chunk(request_id, session_id, seq, text, skipped))

    emit_raw = raw_emitter(notify, request_id)
    return command_streams(
        emit_chunk, emit_raw, terminal=spec.terminal is not None, emit_input=input_emitter(notify)
    )


def finish(outcome: Outcome) -> BashResult:
    s = outcome.summary
    # How the command ended, then what became of its shell; the output; the sandbox.
    heading = (line for line in (outcome.notice, outcome.shell_notice) if line is not None)
    text = "".join(f"{line}\n" for line in heading) + s.text
    if outcome.sandbox_denied is not None:
        text += ("" if not text or text.endswith("\n") else "\n") + outcome.sandbox_denied + "\n"
    working_dir, working_dir_base64 = (None, None)
    if outcome.working_dir is not None:
        working_dir, working_dir_base64 = paths.to_wire(outcome.working_dir)
    return BashResult(
        output=text,
        exit_code=outcome.exit_code,
        cancelled=outcome.cancelled,
        timed_out=outcome.timed_out,
        truncated=s.truncated,
        total_lines=s.total_lines,
        total_bytes=s.total_bytes,
        output_lines=s.output_lines,
        output_bytes=s.output_bytes,
        working_dir=working_dir,
        working_dir_base64=working_dir_base64,
        artifact_id=outcome.artifact_id,
        artifact_truncated=outcome.artifact_truncated,
        sandbox_denied=outcome.sandbox_denied is not None,
        shell_restarted=outcome.shell_restarted,
        queued_seconds=round(outcome.queued_seconds, 3) if outcome.queued_seconds else None,
        one_shot=outcome.one_shot,
        redactions=s.redactions or None,
    )
