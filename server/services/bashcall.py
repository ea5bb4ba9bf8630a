"""The host's `bash`, in the shape of every command-like method (see
`tool/toolplan`): `plan` makes the spec from the params, the command service runs
it while `listener` streams `bash/chunk` (or `pty/output` on a PTY), and
`finish` makes the result. Commands run exactly as given.
"""

from __future__ import annotations

from typing import Any

from bashrpc.protocol import paths
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashChunk, BashParams, BashResult, PtySize
from bashrpc.server.services.commands import CommandSpec, Terminal, clamp_timeout, terminal
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.resumable import Resumable
from bashrpc.server.services.streams import (
    ListenerFactory,
    Notify,
    command_streams,
    input_emitter,
    raw_emitter,
)
from bashrpc.server.settings import Settings


def pty_terminal(params: BashParams) -> Terminal | None:
    """The PTY the command asks for, within limits; None: pipes."""
    if not params.pty:
        return None
    size = params.pty if isinstance(params.pty, PtySize) else PtySize()
    return terminal(size.cols, size.rows)


def plan(params: BashParams, *, request_id: Any, settings: Settings) -> CommandSpec:
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


def listener(notify: Notify, spec: CommandSpec, record: Resumable | None = None) -> ListenerFactory:
    """Chunks (or a PTY's bytes) to the connection, and logged in `record` for
    a resume elsewhere."""
    request_id, session_id = spec.request_id, spec.session_id

    async def emit_chunk(seq: int, text: str, skipped: int) -> None:
        if record is not None:
            record.add(seq, text, skipped)
        await notify("bash/chunk", bash_chunk(request_id, session_id, seq, text, skipped))

    send_raw = raw_emitter(notify, request_id)

    async def emit_raw(seq: int, data: str) -> None:
        if record is not None:
            record.add(seq, data, 0)
        await send_raw(seq, data)

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
    )
