"""Listeners that turn a running command's output into notifications.

A `Listener` hears a running command (the command service feeds it) and
feeds streams: text streams get the sanitized output, raw
streams the terminal's own bytes. Streams flush on a throttle, in tasks of
a group that outlives the request (the connection's requests group), so a
command that prints nothing costs no task at all; `Listener.close` flushes what
is pending, whatever cancelled the request, so every notification of a
request precedes its response.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import msgspec

from bashrpc.protocol.methods import NeedsInput, PtyOutput
from bashrpc.server.output.chunks import ChunkStream, RawStream
from bashrpc.server.output.throttle import Owner
from bashrpc.server.runtime.run.inputwatch import InputWait
from bashrpc.server.runtime.seam.backend import Backpressure

EmitChunk = Callable[[int, str, int], Awaitable[None]]
EmitRaw = Callable[[int, str, int], Awaitable[None]]
# Told when a PTY command waits for its person.
EmitInput = Callable[[InputWait], Awaitable[None]]
# A request's way to send a notification (it knows whether the client still reads).
Notify = Callable[[str, msgspec.Struct], Awaitable[None]]


class Stream(Protocol):
    def push(self, data: bytes) -> None: ...

    # Flushes what is pending, and is not cut short by a cancel of its caller.
    async def close(self) -> None: ...


class Listener:
    """Who hears a running command: its sanitized text, and on a PTY its raw bytes."""

    def __init__(
        self,
        text: Sequence[Stream] = (),
        raw: Sequence[Stream] = (),
        backpressure: Backpressure | None = None,
        on_input: EmitInput | None = None,
    ) -> None:
        self._text = tuple(text)
        self._raw = tuple(raw)
        self._backpressure = backpressure
        self.on_input = on_input

    @property
    def backpressure(self) -> Backpressure | None:
        return self._backpressure

    def on_text(self, clean: bytes) -> None:
        for stream in self._text:
            stream.push(clean)

    def on_raw(self, raw: bytes) -> None:
        for stream in self._raw:
            stream.push(raw)

    async def close(self) -> None:
        """Every stream flushed, whatever cancels the request meanwhile: a stream
        waits for its pump shielded (`Throttle.close`), and only if one runs."""
        for stream in (*self._text, *self._raw):
            await stream.close()

    def joined(self, text: Stream, on_input: EmitInput) -> Listener:
        """This listener, with `text` hearing its text too and `on_input` its
        waits (after its own)."""
        mine = self.on_input

        async def both(wait: InputWait) -> None:
            if mine is not None:
                await mine(wait)
            await on_input(wait)

        return Listener((*self._text, text), self._raw, self._backpressure, both)


# A surface's listener, made in the group its streams flush in.
ListenerFactory = Callable[[Owner], Listener]


def raw_emitter(notify: Notify, request_id: Any) -> EmitRaw:
    """A PTY's bytes as `pty/output`, the same for every command-like method."""

    async def emit_raw(seq: int, data: str, skipped: int) -> None:
        params = PtyOutput(request_id=request_id, seq=seq, data=data, skipped=skipped)
        await notify("pty/output", params)

    return emit_raw


def needs_input(wait: InputWait) -> NeedsInput:
    """A wait for input as the wire tells it."""
    return NeedsInput(
        request_id=wait.request_id if isinstance(wait.request_id, str | int) else None,
        session_id=wait.session_id,
        prompt=wait.prompt,
        secret=wait.secret,
        since=wait.since,
        pid=wait.pid,
        program=wait.program,
        terminal_id=wait.terminal_id,
    )


def input_emitter(notify: Notify) -> EmitInput:
    """A wait for input as `bash/needsInput`."""

    async def emit_input(wait: InputWait) -> None:
        await notify("bash/needsInput", needs_input(wait))

    return emit_input


def command_streams(
    emit_chunk: EmitChunk, emit_raw: EmitRaw, *, terminal: bool, emit_input: EmitInput | None = None
) -> ListenerFactory:
    """The host's `bash`: `bash/chunk` text on pipes, `pty/output` bytes on a PTY,
    and on a PTY `bash/needsInput` when it waits for its person."""

    def make(tg: Owner) -> Listener:
        if terminal:
            return Listener(raw=[RawStream(emit_raw, tg)], on_input=emit_input)
        chunks = ChunkStream(emit_chunk, tg)
        return Listener(text=[chunks], backpressure=chunks)

    return make
