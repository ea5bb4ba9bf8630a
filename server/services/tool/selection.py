"""Which lines of a command's output a tool result shows (pure).

`head` and `tail` select from the whole output, as `cmd | head -n H | tail -n T`
would; the caps then cut what was selected, and only a cap that cut is named
in the notice. The summary holds the output's last `max_bytes` only, so when
`head` wants lines from before those, the caller passes the artifact's first
bytes (`prefix`).

Lines are joined as the model would read them: no newline after the last
shown line unless it ended the output (head 2 of `a..e` is `a\\nb`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from bashrpc.server.output.sink import SinkSummary, count_lines

Cap = Literal["bytes", "lines"]


class Selection(msgspec.Struct, frozen=True):
    text: str
    # Line numbers (1-based, inclusive) of the shown lines in the whole output.
    start: int
    end: int
    # The cap that cut the selected lines; None when head/tail alone chose them.
    cut_by: Cap | None


def select(
    summary: SinkSummary,
    head: int | None,
    tail: int | None,
    max_lines: int,
    prefix: str | None = None,
) -> Selection:
    total = summary.total_lines
    end = total if head is None else min(total, head)
    start = 1 if tail is None else max(1, end - tail + 1)
    window, base, cut_first = _window(summary, start, prefix)
    held = count_lines(window)
    if end < start or held == 0:
        return Selection("", start, min(end, start - 1), "bytes" if end >= start else None)
    lo, hi = max(start, base), min(end, base + held - 1)
    if lo > hi:
        # None of the selected lines is held: the newest held, as many as selected.
        hi = base + held - 1
        lo = max(base, hi - (end - start))
    # The first line the kept tail holds may be only the end of that line.
    whole_lines = not (cut_first and lo == base)
    cut_by: Cap | None = None if (lo, hi) == (start, end) and whole_lines else "bytes"
    if hi - lo + 1 > max_lines:
        lo, cut_by = hi - max_lines + 1, "lines"
    ends_output = hi == total and summary.text.endswith("\n")
    return Selection(_lines(window, lo - base, hi - base + 1, ends_output), lo, hi, cut_by)


def _window(summary: SinkSummary, start: int, prefix: str | None) -> tuple[str, int, bool]:
    """The text holding the selection's first line if any does, its first line's
    number, and whether that first line may be cut."""
    if not summary.truncated:
        return summary.text, 1, False
    base = summary.total_lines - count_lines(summary.text) + 1
    if start >= base or prefix is None:
        return summary.text, base, True
    # Only whole lines of the prefix: its last may be cut mid-way.
    return prefix[: prefix.rfind("\n") + 1], 1, False


def _lines(text: str, first: int, last: int, final_newline: bool) -> str:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return "\n".join(lines[first:last]) + ("\n" if final_newline else "")
