"""Shaping a finished command into an MCP tool result (pure).

The order is fixed: the timeout notice, then the output (line cap, then head,
then tail; "(no output)" when empty), the truncation notice, the exit status
and finally the timeout-clamp notice. A truncated result names its artifact
on success and on failure alike, so a failing build's log is never lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol import messages
from protocol.mcp import (
    BashStructured,
    CallToolResult,
    DetailsMeta,
    ShownRange,
    TextContent,
    ToolDetails,
    Truncation,
)
from server.executor import Outcome
from server.normalize import apply_head_tail
from server.sink import count_lines

DEFAULT_MAX_LINES = 2000


@dataclass(frozen=True, slots=True)
class Shaping:
    head: int | None
    tail: int | None
    max_bytes: int
    max_lines: int = DEFAULT_MAX_LINES
    # (requested, applied) when the timeout was clamped.
    clamp: tuple[float, float] | None = None


def _limit_label(truncated_by: str, shaping: Shaping) -> str:
    if truncated_by == "lines":
        return f"{shaping.max_lines} lines"
    return f"{shaping.max_bytes // 1024}KB"


def shape(outcome: Outcome, shaping: Shaping) -> CallToolResult:
    s = outcome.summary
    text = s.text
    truncated_by: str | None = "bytes" if s.truncated else None
    kept_lines = count_lines(text)
    if kept_lines > shaping.max_lines:
        text, _, _ = apply_head_tail(text, None, shaping.max_lines)
        kept_lines = shaping.max_lines
        truncated_by = "lines"
    # Line numbers (1-based) of the kept text within the whole output.
    first_line = s.total_lines - kept_lines + 1
    text, first, last = apply_head_tail(text, shaping.head, shaping.tail)

    body = text or messages.NO_OUTPUT
    truncation: Truncation | None = None
    if truncated_by is not None:
        start, end = first_line + first, first_line + last - 1
        truncation = Truncation(
            direction="tail",
            truncated_by="lines" if truncated_by == "lines" else "bytes",
            total_lines=s.total_lines,
            total_bytes=s.total_bytes,
            output_lines=count_lines(text),
            output_bytes=len(text.encode()),
            shown_range=ShownRange(start=start, end=end),
            artifact_id=outcome.artifact_id,
            artifact_truncated=outcome.artifact_truncated,
        )
        full = ""
        if outcome.artifact_id is not None:
            full = messages.TRUNCATION_FULL.format(id=outcome.artifact_id)
        body += messages.TRUNCATION_NOTICE.format(
            start=start,
            end=end,
            total=s.total_lines,
            limit=_limit_label(truncated_by, shaping),
            full=full,
        )

    is_error = True
    if outcome.timed_out:
        body = f"{outcome.notice}\n{body}"
    elif outcome.exit_code is None:
        body += messages.MISSING_EXIT_STATUS
    elif outcome.exit_code != 0:
        body += messages.EXITED_WITH_CODE.format(code=outcome.exit_code)
    else:
        is_error = False
    if shaping.clamp is not None:
        requested, applied = shaping.clamp
        body += messages.TIMEOUT_CLAMPED.format(
            requested=messages.format_seconds(requested),
            applied=messages.format_seconds(applied),
        )
    return CallToolResult(
        content=[TextContent(text=body)],
        structured_content=BashStructured(
            exit_code=outcome.exit_code,
            cancelled=outcome.cancelled,
            timed_out=outcome.timed_out,
            truncation=truncation,
        ),
        is_error=is_error,
        details=None
        if truncation is None
        else ToolDetails(meta=DetailsMeta(truncation=truncation)),
    )
