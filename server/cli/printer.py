"""Where `bashrpc exec` puts the command's output: its own stdout, byte for
byte, with what the stream skipped filled in from the artifact at the end."""

from __future__ import annotations

import base64
import sys
from typing import IO

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.methods import (
    ARTIFACT_READ_MAX_LIMIT,
    ArtifactReadParams,
    ArtifactReadResult,
    BashChunk,
    BashResult,
)
from bashrpc.server.cli.client import Connection

_decode_chunk = msgspec.json.Decoder(BashChunk).decode


def exact_bytes(text: str, exact: str | None) -> bytes:
    """The output's bytes as the command wrote them: `...Base64` when the text
    lost some (they were not UTF-8)."""
    return base64.b64decode(exact) if exact is not None else text.encode()


class ReaderGone(Exception):
    """Nobody reads this client's stdout any more (`exec … | head`)."""


class Printer:
    """Writes the stream to stdout until a gap, remembering how much it wrote."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.written = 0
        self.gap = False
        # Once the reader is gone, what still streams in is dropped.
        self.muted = False

    def on_notification(self, message: ServerMessage) -> None:
        if self.muted or message.method != "bash/chunk" or not message.params:
            return
        chunk = _decode_chunk(message.params)
        if chunk.skipped:
            self.gap = True
        if not self.gap:
            self.write(exact_bytes(chunk.text, chunk.text_base64))

    def write(self, data: bytes) -> None:
        try:
            self.out.write(data)
            self.out.flush()
        except BrokenPipeError:
            self.muted = True
            raise ReaderGone from None
        self.written += len(data)

    def end_open_line(self, result: BashResult) -> None:
        """A command stopped mid-line leaves the terminal's next prompt on a line
        of its own."""
        stopped = result.cancelled or result.timed_out
        if stopped and result.output and not result.output.endswith("\n"):
            self.write(b"\n")


def fill_gap(connection: Connection, printer: Printer, result: BashResult) -> None:
    """Print what the stream skipped, from the artifact (or the untruncated result)."""
    if result.artifact_id is None:
        if result.truncated:
            print(messages.EXEC_OUTPUT_INCOMPLETE, file=sys.stderr)
            return
        printer.write(result.output.encode()[printer.written :])
        return
    offset: int | None = printer.written
    while offset is not None:
        params = ArtifactReadParams(
            id=result.artifact_id, offset=offset, limit=ARTIFACT_READ_MAX_LIMIT
        )
        raw = connection.wait(connection.send("artifact/read", params))
        page = msgspec.json.decode(raw, type=ArtifactReadResult)
        printer.write(exact_bytes(page.text, page.text_base64))
        offset = page.next_offset
    if result.artifact_truncated:
        print(messages.EXEC_OUTPUT_INCOMPLETE, file=sys.stderr)
