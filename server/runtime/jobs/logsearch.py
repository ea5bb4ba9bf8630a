"""The search of a job's output for its `ready.log` pattern, in a process of its own.

A regular expression can take exponential time (`(a+)+$`), or a polynomial
one over a long line (`.*x` over 64 KiB takes seconds), and Python's `re`
holds the interpreter while it runs: searched in the server, a pattern over
output the command controls would freeze every connection. So the search
runs here, as `python -I -S logsearch.py` (the standard library only, nothing
of the server's): the pattern comes first on stdin, as one line of JSON, then
the job's output as it comes; the match, once found, goes to stdout as one
line (`FOUND` and the text as JSON), and the process exits. The server feeds
it, reads it, and kills it when the wait ends (`readiness.py`), so a search
never outlasts its `ready.timeout`.

The output is searched line by line, so a match is found once however it is
split; the unfinished last line is carried over, bounded (`MAX_CARRIED_BYTES`).
"""

from __future__ import annotations

import io
import json
import re
import sys
from typing import cast

# A line longer than this is searched in pieces.
MAX_CARRIED_BYTES = 64 * 1024
READ_BYTES = 64 * 1024
# What starts the line of a match.
FOUND = b"found "


class LineSearch:
    """The search itself (pure): output in, the first match out."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern
        self._carried = b""

    def feed(self, data: bytes) -> str | None:
        """The text matched in the unfinished line and `data`, or None."""
        text = self._carried + data
        found = self._pattern.search(text.decode("utf-8", "replace"))
        if found is not None:
            return found.group(0)
        self._carried = text[text.rfind(b"\n") + 1 :][-MAX_CARRIED_BYTES:]
        return None


def main() -> int:
    """0 once a match is written; 1 at the end of the output without one."""
    # Buffered: `read1` takes what `readline` read ahead, and no more than there is.
    stdin = cast(io.BufferedReader, sys.stdin.buffer)
    stdout = sys.stdout.buffer
    search = LineSearch(re.compile(json.loads(stdin.readline())))
    # Searched before any output too: a pattern the empty text matches (`^`) is met at once.
    data = b""
    while True:
        matched = search.feed(data)
        if matched is not None:
            stdout.write(FOUND + json.dumps(matched).encode() + b"\n")
            stdout.flush()
            return 0
        data = stdin.read1(READ_BYTES)
        if not data:
            return 1


if __name__ == "__main__":
    sys.exit(main())
