"""Shaping a finished command into an MCP tool result (pure).

The order is fixed: the timeout notice, the shell's (restarted, or started in
the workspace), then the output (head and tail over the whole output, then the
caps, see `selection`; "(no output)" when empty), the truncation notice, the
sandbox's denial, the exit status and finally the timeout-clamp notice.
A truncated result names its artifact on success and on failure alike, so a
failing build's log is never lost.
"""

from __future__ import annotations

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    ARTIFACT_URI_TEMPLATE,
    BashStructured,
    CallToolResult,
    DetailsMeta,
    ShownRange,
    TextContent,
    ToolDetails,
    Truncation,
)
from bashrpc.server.output.sink import count_lines
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.tool.selection import Cap, select

DEFAULT_MAX_LINES = 2000


class Shaping(msgspec.Struct, frozen=True):
    head: int | None
    tail: int | None
    max_bytes: int
    max_lines: int = DEFAULT_MAX_LINES
    # (requested, applied) when the timeout was clamped.
    clamp: tuple[float, float] | None = None
    # The timeout applied when the call sent `timeout: null` (a form's empty field).
    null_timeout: float | None = None


def _limit_label(cut_by: Cap | None, shaping: Shaping) -> str:
    if cut_by is None:
        return ""
    limit = f"{shaping.max_lines} lines" if cut_by == "lines" else f"{shaping.max_bytes // 1024}KB"
    return messages.TRUNCATION_LIMIT.format(limit=limit)


class _Kept(msgspec.Struct, frozen=True):
    """The output as the result shows it, and what was cut to get there."""

    text: str
    truncation: Truncation | None
    notice: str


def _keep(outcome: Outcome, shaping: Shaping, prefix: str | None) -> _Kept:
    """The selected lines; a truncation record and notice when a cap cut them,
    or when head/tail left lines out of an output kept whole in an artifact."""
    s = outcome.summary
    shown = select(s, shaping.head, shaping.tail, shaping.max_lines, prefix)
    if shown.cut_by is None and (outcome.artifact_id is None or not s.truncated):
        return _Kept(shown.text, None, "")
    truncation = Truncation(
        direction="tail",
        truncated_by=shown.cut_by,
        total_lines=s.total_lines,
        total_bytes=s.total_bytes,
        output_lines=count_lines(shown.text),
        output_bytes=len(shown.text.encode()),
        shown_range=ShownRange(start=shown.start, end=shown.end),
        artifact_id=outcome.artifact_id,
        artifact_truncated=outcome.artifact_truncated,
    )
    full = ""
    if outcome.artifact_id is not None:
        full = messages.TRUNCATION_FULL.format(id=outcome.artifact_id)
    notice = messages.TRUNCATION_NOTICE.format(
        start=shown.start,
        end=shown.end,
        total=s.total_lines,
        limit=_limit_label(shown.cut_by, shaping),
        full=full,
    )
    return _Kept(shown.text, truncation, notice)


def _paragraph(text: str, more: str) -> str:
    """`more` after one blank line, whether or not `text` ended its last line."""
    return text + ("\n" if text.endswith("\n") else "\n\n") + more


def _ending(outcome: Outcome) -> tuple[str, bool]:
    """What the text ends with about how the command ended; and whether that is an error."""
    if outcome.timed_out:
        return "", True
    if outcome.exit_code is None:
        return messages.MISSING_EXIT_STATUS, True
    if outcome.exit_code != 0:
        return messages.EXITED_WITH_CODE.format(code=outcome.exit_code), True
    return "", False


def _artifact_uri(truncation: Truncation | None) -> str | None:
    if truncation is None or truncation.artifact_id is None:
        return None
    return ARTIFACT_URI_TEMPLATE.format(id=truncation.artifact_id)


def shape(outcome: Outcome, shaping: Shaping, prefix: str | None = None) -> CallToolResult:
    """`prefix`: the artifact's first bytes, for a `head` reaching before the kept tail."""
    kept = _keep(outcome, shaping, prefix)
    body = (kept.text or messages.NO_OUTPUT) + kept.notice
    if outcome.sandbox_denied is not None:
        body = _paragraph(body, outcome.sandbox_denied)
    ending, is_error = _ending(outcome)
    if ending:
        body = _paragraph(body, ending)
    if outcome.shell_notice is not None:
        body = f"{outcome.shell_notice}\n{body}"
    if outcome.timed_out:
        body = f"{outcome.notice}\n{body}"
    if shaping.clamp is not None:
        requested, applied = shaping.clamp
        body += messages.TIMEOUT_CLAMPED.format(
            requested=messages.format_seconds(requested),
            applied=messages.format_seconds(applied),
        )
    if shaping.null_timeout is not None:
        body += messages.TIMEOUT_NULL.format(applied=messages.format_seconds(shaping.null_timeout))
    truncation = kept.truncation
    details = None if truncation is None else ToolDetails(meta=DetailsMeta(truncation=truncation))
    return CallToolResult(
        content=[TextContent(text=body)],
        structured_content=BashStructured(
            output=body,
            exit_code=outcome.exit_code,
            cancelled=outcome.cancelled,
            timed_out=outcome.timed_out,
            truncation=truncation,
            artifact_uri=_artifact_uri(truncation),
            sandbox_denied=outcome.sandbox_denied is not None,
            shell_restarted=outcome.shell_restarted,
            queued_seconds=round(outcome.queued_seconds, 3),
        ),
        is_error=is_error,
        details=details,
    )
