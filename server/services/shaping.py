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
    ARTIFACT_URI_TEMPLATE,
    BashStructured,
    CallToolResult,
    DetailsMeta,
    ShownRange,
    TextContent,
    ToolDetails,
    Truncation,
)
from server.output.sink import count_lines
from server.services.normalize import apply_head_tail
from server.services.outcome import Outcome

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


@dataclass(frozen=True, slots=True)
class _Kept:
    """The output as the result shows it, and what was cut to get there."""

    text: str
    truncation: Truncation | None
    notice: str


def _keep(outcome: Outcome, shaping: Shaping) -> _Kept:
    """The line cap, then head, then tail; the truncation record and notice."""
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
    if truncated_by is None:
        return _Kept(text, None, "")
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
    notice = messages.TRUNCATION_NOTICE.format(
        start=start,
        end=end,
        total=s.total_lines,
        limit=_limit_label(truncated_by, shaping),
        full=full,
    )
    return _Kept(text, truncation, notice)


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


def shape(outcome: Outcome, shaping: Shaping) -> CallToolResult:
    kept = _keep(outcome, shaping)
    body = (kept.text or messages.NO_OUTPUT) + kept.notice
    ending, is_error = _ending(outcome)
    if ending:
        body = _paragraph(body, ending)
    if outcome.timed_out:
        body = f"{outcome.notice}\n{body}"
    if shaping.clamp is not None:
        requested, applied = shaping.clamp
        body += messages.TIMEOUT_CLAMPED.format(
            requested=messages.format_seconds(requested),
            applied=messages.format_seconds(applied),
        )
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
        ),
        is_error=is_error,
        details=details,
    )
