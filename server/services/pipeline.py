"""A command's bytes on their way from its runner to the output sink and its
listener, and the one finishing step of both runners."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from bashrpc.protocol import messages
from bashrpc.server.output.chunks import CHUNK_INTERVAL_SECONDS
from bashrpc.server.output.crfold import CarriageReturnFolder
from bashrpc.server.output.redact import Redactor, TableSource
from bashrpc.server.output.sink import OutputSink
from bashrpc.server.runtime.run.runners import RunResult
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.streams import Listener


class Pipeline:
    """Bytes from a runner to the sink and the listener; on a PTY, raw bytes
    are passed on as they are and carriage returns are folded first."""

    def __init__(
        self,
        sink: OutputSink,
        listener: Listener,
        terminal: bool,
        secrets: TableSource | None = None,
    ) -> None:
        self.sink = sink
        self._listener = listener
        self._folder = CarriageReturnFolder() if terminal else None
        # A terminal's raw bytes are redacted on their own (the sink redacts the text).
        self._raw = Redactor(secrets) if terminal and secrets is not None else None
        self._holding = secrets is not None
        # Reads so far, and at the release timer's start: a read since defers it.
        self._feeds = 0
        self._seen = 0
        # While the command runs (`releasing`): the loop that times a release, and
        # the timer, set at a read that leaves something held (most never do).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def feed(self, data: bytes) -> None:
        if self._folder is not None:
            if self._raw is None:
                self._raw_out(data)
            else:
                self._raw_out(self._raw.feed_both(data)[1])
            data = self._folder.feed(data)
        self._text(self.sink.feed(data))
        if self._loop is not None:
            self._feeds += 1
            # `_held`, inline: this runs for every read of a flood.
            text, raw = self.sink.redactor, self._raw
            if self._timer is None and (
                (text is not None and text.held) or (raw is not None and raw.held)
            ):
                self._arm(self._loop)

    def feed_text(self, data: bytes) -> None:
        """A message of the server's own, as text only (never as terminal bytes)."""
        self._text(self.sink.feed(data))

    @contextmanager
    def releasing(self) -> Iterator[None]:
        """While the command runs, bytes held back from the streams (they may begin a
        secret) are let go in time: never a chunk interval past the last read.

        A timer of the loop's, not a task: a task group per command costs every
        command a loop turn at its exit, and most never hold a byte."""
        if not self._holding:
            yield
            return
        self._loop = asyncio.get_running_loop()
        try:
            yield
        finally:
            self._loop = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _held(self) -> bool:
        """Whether either redactor holds bytes back from its stream."""
        text, raw = self.sink.redactor, self._raw
        return bool((text is not None and text.held) or (raw is not None and raw.held))

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._seen = self._feeds
        self._timer = loop.call_later(CHUNK_INTERVAL_SECONDS, self._due)

    def _due(self) -> None:
        """A chunk interval passed. With no read since, the held bytes go: a quiet
        command's last words (a prompt, a line still being written) are never held
        back from its host; the result and the artifact still wait for them. With
        a read since, and something still held, another interval."""
        self._timer = None
        if self._feeds == self._seen:
            if self._raw is not None:
                self._raw_out(self._raw.release())
            self._text(self.sink.release())
        if self._loop is not None and self._held():
            self._arm(self._loop)

    def _raw_out(self, raw: bytes) -> None:
        if raw:
            self._listener.on_raw(raw)

    def _text(self, clean: bytes) -> None:
        if clean:
            self._listener.on_text(clean)

    def finish(self) -> None:
        if self._folder is not None:
            if self._raw is not None:
                self._raw_out(self._raw.finish_both()[1])
            self._text(self.sink.feed(self._folder.finish()))
        self._text(self.sink.finish())


def finish(pipeline: Pipeline, run: RunResult, timeout: float | None) -> Outcome:
    """The one finishing step of both runners."""
    if run.start_error is not None:
        pipeline.feed_text(messages.PTY_ERROR.format(reason=run.start_error).encode())
    pipeline.finish()
    spill = pipeline.sink.spill
    return Outcome(
        summary=pipeline.sink.summary(),
        exit_code=run.exit_code,
        cancelled=run.killed,
        timed_out=run.timed_out,
        timeout=timeout,
        working_dir=run.cwd,
        artifact_id=None if spill is None else spill.close(),
        artifact_truncated=spill is not None and spill.cut,
        shell_restarted=run.shell_restarted,
        cwd_fallback=run.cwd_fallback,
        start_notices=run.start_notices,
    )
