"""A command's bytes on their way from its runner to the output sink and its
listener, and the one finishing step of both runners."""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.server.output.crfold import CarriageReturnFolder
from bashrpc.server.output.sink import OutputSink
from bashrpc.server.runtime.run.runners import RunResult
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.streams import Listener


class Pipeline:
    """Bytes from a runner to the sink and the listener; on a PTY, raw bytes
    are passed on as they are and carriage returns are folded first."""

    def __init__(self, sink: OutputSink, listener: Listener, terminal: bool) -> None:
        self.sink = sink
        self._listener = listener
        self._folder = CarriageReturnFolder() if terminal else None

    def feed(self, data: bytes) -> None:
        if self._folder is not None:
            self._listener.on_raw(data)
            data = self._folder.feed(data)
        self._text(self.sink.feed(data))

    def feed_text(self, data: bytes) -> None:
        """A message of the server's own, as text only (never as terminal bytes)."""
        self._text(self.sink.feed(data))

    def _text(self, clean: bytes) -> None:
        if clean:
            self._listener.on_text(clean)

    def finish(self) -> None:
        if self._folder is not None:
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
