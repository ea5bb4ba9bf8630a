"""OutputSink: bounded memory for unbounded output, sans-I/O.

The sink keeps only the tail of the sanitized output, counts what went past,
and the moment anything would be dropped it hands the whole stream so far to a
spill target (an artifact file), then forwards every later byte there too.
So memory stays bounded while the full text stays recoverable.

What it keeps (tail, counts, artifact) has its carriage returns folded, as a
terminal shows it: a line redrawn with CR keeps its last state. What it
streams is the text as it comes, CRs as the command printed them: a line still
being written is sent at once, since holding it until it ends would hide a
prompt or a row of progress dots, and a chunk cannot be taken back; a client
that shows the stream on a terminal (`bashrpc exec`) redraws the line as bash
would have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

from bashrpc.server.output import utf8
from bashrpc.server.output.crfold import CarriageReturnFolder
from bashrpc.server.output.redact import Redactor
from bashrpc.server.output.sanitize import Sanitizer

DEFAULT_MAX_BYTES = 51200
# The tail buffer is compacted only when it grows to this multiple of the
# limit, so compaction costs O(1) amortized per byte.
_COMPACT_FACTOR = 2


class Spill(Protocol):
    """Where the full stream goes once it no longer fits in memory."""

    # True once the spill stopped at a size cap: complete only up to there.
    cut: bool

    def write(self, data: bytes) -> None: ...

    def close(self) -> int | None:
        """Finish; returns the id of the complete copy, or None if it failed."""
        ...


class SinkSummary(msgspec.Struct, frozen=True):
    text: str
    truncated: bool
    total_bytes: int
    total_lines: int
    output_bytes: int
    output_lines: int
    # Secrets replaced in the output, by name.
    redactions: dict[str, int] = msgspec.field(default_factory=dict)


def count_lines(data: bytes | str) -> int:
    """Lines as a person counts them: a final line without LF still counts."""
    if not data:
        return 0
    newline = b"\n" if isinstance(data, bytes) else "\n"
    n = data.count(newline)  # type: ignore[arg-type]
    return n if data.endswith(newline) else n + 1  # type: ignore[arg-type]


class OutputSink:
    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        open_spill: Callable[[], Spill | None] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._max = max_bytes
        self._open_spill = open_spill
        self._sanitizer = Sanitizer()
        # After the sanitizer, so a secret an escape sequence cuts in two is whole
        # again; before everything else, so nothing the sink gives or keeps has one.
        self.redactor = redactor
        self._folder = CarriageReturnFolder()
        self._tail: bytes | bytearray = bytearray()
        self._spill: Spill | None = None
        self.total_bytes = 0
        self._ends_with_newline = True
        self.truncated = False
        # Whether anything was fed: a sink never fed has nothing held to finish.
        self._fed = False

    @property
    def spill(self) -> Spill | None:
        return self._spill

    def feed(self, data: bytes) -> bytes:
        """Take raw output; return it sanitized (UTF-8) for streaming, its CRs as the
        command printed them (what is kept folds them instead)."""
        self._fed = True
        clean = streamed = self._sanitizer.feed(data)
        if self.redactor is not None:
            clean, streamed = self.redactor.feed_both(clean)
        if clean:
            kept = self._folder.feed(clean)
            if kept:
                self._append(kept)
        return streamed

    def release(self) -> bytes:
        """What the stream was held back, for a command gone quiet (the kept copy
        still waits for the next read: `Redactor.release`)."""
        return b"" if self.redactor is None else self.redactor.release()

    def finish(self) -> bytes:
        if not self._fed:
            # Most commands print nothing: no stage holds a byte.
            return b""
        clean = streamed = self._sanitizer.finish()
        if self.redactor is not None:
            clean, streamed = self.redactor.feed_both(clean)
            rest, streamed_rest = self.redactor.finish_both()
            clean, streamed = clean + rest, streamed + streamed_rest
        kept = self._folder.feed(clean) + self._folder.finish()
        if kept:
            self._append(kept)
        return streamed

    def _append(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self._ends_with_newline = data.endswith(b"\n")
        if self._spill is not None:
            self._spill.write(data)
        elif not self.truncated and self.total_bytes > self._max:
            self.truncated = True
            if self._open_spill is not None:
                self._spill = self._open_spill()
                if self._spill is not None:
                    # Nothing was dropped yet, so the tail and this are the whole stream.
                    self._spill.write(bytes(self._tail))
                    self._spill.write(data)
        if len(data) >= self._max:
            # Only the newest `max` bytes can be kept. A piece of a read's size is
            # kept by reference, uncopied (bytes are immutable); a larger one is cut.
            self._tail = data if len(data) <= self._max * _COMPACT_FACTOR else data[-self._max :]
            return
        if type(self._tail) is not bytearray:
            self._tail = bytearray(self._tail)
        self._tail += data
        if len(self._tail) > self._max * _COMPACT_FACTOR:
            del self._tail[: len(self._tail) - self._max]

    def tail_text(self) -> str:
        """The retained tail and the line being written, decoded; cheap enough
        for periodic snapshots."""
        tail = self._tail + self._folder.pending()
        start = utf8.char_start(tail, max(0, len(tail) - self._max))
        return tail[start:].decode("utf-8", "replace")

    def summary(self) -> SinkSummary:
        start = utf8.char_start(self._tail, max(0, len(self._tail) - self._max))
        kept = bytes(self._tail[start:])
        total_lines = 0
        if self.total_bytes:
            # Folding keeps every LF (a redraw starts over only the line it is in),
            # so the kept text has as many as the sanitizer passed on.
            newlines = self._sanitizer.newlines
            if self.redactor is not None:
                newlines -= self.redactor.lines_removed
            total_lines = newlines + (0 if self._ends_with_newline else 1)
        text = kept.decode("utf-8", "replace")
        truncated = self.truncated
        if not text.isascii():
            # `text` is JSON's: bytes that are not UTF-8 (kept exact in the artifact)
            # show as U+FFFD, which may be longer: its tail within the limit is kept.
            shown = text.encode()
            kept = shown[utf8.char_start(shown, max(0, len(shown) - self._max)) :]
            text = kept.decode()
            truncated = truncated or len(kept) < len(shown)
        return SinkSummary(
            text=text,
            truncated=truncated,
            total_bytes=self.total_bytes,
            total_lines=total_lines,
            output_bytes=len(kept),
            output_lines=count_lines(kept),
            redactions={} if self.redactor is None else dict(self.redactor.counts),
        )
