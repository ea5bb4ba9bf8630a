"""Transcripts: a host's session with a server, as JSON Lines any language can write.

The first line is a `Header`; every other line is one message, in the order the
recorder saw them: a `ClientRecord` (host to server) or a `ServerRecord`. The
file order is the causal order: a client message comes after every server
message the host had received when it sent it, and replay waits for those.

Paths of the recording's workspace, HOME, artifacts and temporary directories
are written as placeholders (`<WORKSPACE>` ...), in both directions, so a
transcript replays in another checkout at another path. See
`bashrpc.protocol.normalization` for what else is compared loosely.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import described

# The layout of the file; a reader refuses another.
TRANSCRIPT_FORMAT = 1
# How deep a line's JSON may nest: replay and normalization walk it recursively,
# and no JSON-RPC message a host sends comes near it.
MAX_NESTING = 64


class Rule(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True, frozen=True):
    """A host's own normalization: `pattern` (a Python `re` regex) is replaced by
    `replacement` in the string values at `field` before comparison."""

    field: Annotated[
        str,
        described(
            "Where it applies: a dotted path in a normalized request (`result.output`,"
            " `output.bash/chunk`, `error.message`), list indices left out; `*` matches"
            " any part, so `*` alone is every string."
        ),
    ]
    pattern: Annotated[str, described("A regular expression (Python `re` syntax).")]
    replacement: Annotated[str, described("What each match becomes; `\\1` names a group.")]
    method: Annotated[
        str | None, described("Only in replies to this method (default: every method).")
    ] = None


class Header(
    msgspec.Struct, tag="header", tag_field="type", rename="camel", kw_only=True, omit_defaults=True
):
    """The first line of a transcript."""

    format: Annotated[int, described("The transcript layout's version: 1.")] = TRANSCRIPT_FORMAT
    normalization: Annotated[
        int, described("The version of the published normalization the comparison uses.")
    ]
    server_args: Annotated[
        list[str],
        described(
            "The server's arguments after `bashrpc`, without the per-run paths"
            " (--workspace, --artifacts-dir, --socket), which replay gives its own."
            " Replay runs only `serve` or `attach` with options that cannot loosen the"
            " sandbox unless it is given --trust."
        ),
    ] = msgspec.field(default_factory=list)
    rules: Annotated[
        list[Rule], described("The host's own normalization rules, applied after the published.")
    ] = msgspec.field(default_factory=list)
    fixture: Annotated[
        str | None,
        described(
            "A directory in the transcript's folder or below it, relative to the"
            " transcript, copied in as the workspace before replay (regular files and"
            " directories only)."
        ),
    ] = None


class ClientRecord(
    msgspec.Struct, tag="client", tag_field="type", rename="camel", kw_only=True, omit_defaults=True
):
    """A line the host sent. `message` holds it when it is JSON; `line` holds a
    line that is not (a test of bad input), sent as is."""

    waited: Annotated[
        bool,
        described(
            "Every request the host had sent before this one was answered when it was"
            " sent (lockstep); false when it was pipelined behind an unanswered one."
        ),
    ]
    message: Annotated[Any, described("The JSON value of the line.")] = None
    line: Annotated[str | None, described("The line's text, when it is not JSON.")] = None
    line_base64: Annotated[
        str | None, described("The line's bytes in base64, when they are not UTF-8.")
    ] = None


class ServerRecord(
    msgspec.Struct, tag="server", tag_field="type", rename="camel", kw_only=True, omit_defaults=True
):
    """A line the server wrote: a JSON-RPC message, or a batch of replies."""

    message: Annotated[Any, described("The JSON value of the line.")] = None
    line: Annotated[str | None, described("The line's text, when it is not JSON.")] = None


Record = ClientRecord | ServerRecord
Line = Header | ClientRecord | ServerRecord


class Transcript(msgspec.Struct, kw_only=True):
    """A whole transcript: its header and its records, in file order."""

    header: Header
    records: list[Record]


class TranscriptError(ValueError):
    """A file that is not a transcript this version reads; the message says where."""


_decode_line = msgspec.json.Decoder(Line).decode
_encoder = msgspec.json.Encoder()


def loads(data: bytes) -> Transcript:
    """Parse a transcript's bytes; a bad line raises TranscriptError naming its number."""
    lines = [line for line in data.splitlines() if line.strip()]
    if not lines:
        raise TranscriptError("line 1: empty file, expected a header")
    parsed: list[Line] = []
    for number, line in enumerate(lines, 1):
        too_deep = messages.TRANSCRIPT_TOO_DEEP.format(number=number, limit=MAX_NESTING)
        try:
            item = _decode_line(line)
        except msgspec.DecodeError as exc:
            raise TranscriptError(f"line {number}: {exc}") from None
        except RecursionError:
            raise TranscriptError(too_deep) from None
        if not isinstance(item, Header) and nesting(item.message) > MAX_NESTING:
            raise TranscriptError(too_deep)
        parsed.append(item)
    header, *rest = parsed
    if not isinstance(header, Header):
        raise TranscriptError("line 1: expected the header")
    if header.format != TRANSCRIPT_FORMAT:
        raise TranscriptError(f"line 1: format {header.format}, this reader reads 1")
    records: list[Record] = []
    for number, item in enumerate(rest, 2):
        if isinstance(item, Header):
            raise TranscriptError(f"line {number}: a second header")
        records.append(item)
    return Transcript(header=header, records=records)


def nesting(value: Any) -> int:
    """How deep a JSON value's arrays and objects nest, counted without
    recursion, and no further than one past MAX_NESTING."""
    deepest = 0
    stack = [(value, 1)]
    while stack and deepest <= MAX_NESTING:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            members = item.values() if isinstance(item, dict) else item
            stack += [(member, depth + 1) for member in members]
    return deepest


def line_record(line: bytes, client: bool, waited: bool = True) -> Record:
    """One line as its record: the JSON value, else the text, else the bytes.
    JSON nested deeper than a transcript may hold is kept as its text, sent as is."""
    body = line.rstrip(b"\n")
    try:
        message = msgspec.json.decode(body)
        if nesting(message) > MAX_NESTING:
            raise msgspec.DecodeError("nested too deep")
    except (msgspec.DecodeError, RecursionError):
        try:
            text = body.decode()
        except UnicodeDecodeError:
            if client:
                return ClientRecord(waited=waited, line_base64=base64.b64encode(body).decode())
            return ServerRecord(line=body.decode(errors="replace"))
        return ClientRecord(waited=waited, line=text) if client else ServerRecord(line=text)
    if client:
        return ClientRecord(waited=waited, message=withheld(message))
    return ServerRecord(message=message)


# The methods whose `data` may be a secret (`secret: true`).
SECRET_INPUTS = ("pty/input", "terminal/write")


def withheld(message: Any) -> Any:
    """A host's message with the text of a secret input replaced: a transcript
    never holds a password (its replay types the placeholder instead)."""
    if isinstance(message, list):
        return [withheld(m) for m in message]
    if not isinstance(message, dict) or message.get("method") not in SECRET_INPUTS:
        return message
    params = message.get("params")
    if not isinstance(params, dict) or params.get("secret") is not True or "data" not in params:
        return message
    return {**message, "params": {**params, "data": messages.SECRET_WITHHELD}}


def client_line(record: ClientRecord, change: Callable[[str], str]) -> bytes:
    """The bytes a client record sends, `change` applied to the strings of its message."""
    if record.line_base64 is not None:
        return base64.b64decode(record.line_base64) + b"\n"
    if record.line is not None:
        return record.line.encode() + b"\n"
    return _encoder.encode(map_strings(record.message, change)) + b"\n"


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A JSON value with `change` applied to every string in it, keys kept."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, change) for k, v in value.items()}
    return value


def dumps(transcript: Transcript) -> bytes:
    """The file: one JSON object per line, the header first."""
    lines = [transcript.header, *transcript.records]
    return b"".join(map(dump_line, lines))


def dump_line(line: Line) -> bytes:
    """One line of the file, its newline included."""
    return _encoder.encode(line) + b"\n"
