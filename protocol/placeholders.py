"""Per-run paths as placeholders, so a transcript replays at another path.

The recorder writes `<WORKSPACE>`, `<HOME>`, `<ARTIFACTS>`, `<ARTIFACTS_ROOT>`
and `<TMP>` for the directories of its run, in every string of both
directions; replay puts its own directories back into what it sends, and
the same placeholders into what it receives.

Streamed output is substituted over the whole stream, not chunk by chunk, so
a path that a chunk boundary cuts in two is still found; the placeholder then
lands in the chunk where the path began. `PathHider` does it as records come,
so the recorder writes each as soon as no later text can change it.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import itertools
import re
from collections.abc import Sequence
from typing import Any

from bashrpc.protocol.transcript import ClientRecord, Record, ServerRecord, map_strings

WORKSPACE = "<WORKSPACE>"
HOME = "<HOME>"
ARTIFACTS = "<ARTIFACTS>"
ARTIFACTS_ROOT = "<ARTIFACTS_ROOT>"
TMP = "<TMP>"

# (the path as the run knows it, its placeholder); several paths may share one.
Paths = Sequence[tuple[str, str]]

# A path ends where a path component cannot go on: a match of `/tmp` leaves `/tmpx` alone.
_PATH_END = r"(?![A-Za-z0-9._~+-])"
# Streams whose notifications carry pieces of one output, and the field with the piece.
TEXT_STREAMS = {"bash/chunk": "text"}
BYTE_STREAMS = {"pty/output": "data"}
# Beside a text piece that is not UTF-8: its exact bytes, in base64.
EXACT_TEXT = "textBase64"


def _pattern(paths: Paths) -> re.Pattern[str] | None:
    usable = sorted({p for p, _ in paths if p not in ("", "/")}, key=len, reverse=True)
    if not usable:
        return None
    return re.compile("|".join(re.escape(p.rstrip("/")) + _PATH_END for p in usable))


class Substitution:
    """Paths to placeholders (`hide`) and back (`show`) in strings and JSON values."""

    def __init__(self, paths: Paths) -> None:
        self._to_placeholder = {p.rstrip("/"): h for p, h in paths if p not in ("", "/")}
        self._pattern = _pattern(paths)
        shown: dict[str, str] = {}
        for path, holder in paths:
            shown.setdefault(holder, path.rstrip("/"))
        self._to_path = shown
        self._holders = (
            re.compile("|".join(re.escape(h) for h in sorted(shown, key=len, reverse=True)))
            if shown
            else None
        )

    def hide(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self._to_placeholder[m.group(0)], text)

    def show(self, text: str) -> str:
        if self._holders is None:
            return text
        return self._holders.sub(lambda m: self._to_path[m.group(0)], text)

    def for_bytes(self) -> Substitution:
        """The same paths in raw bytes shown as latin-1 text (one char a byte)."""
        pairs = [(p.encode().decode("latin-1"), h) for p, h in self._to_placeholder.items()]
        return Substitution(pairs)

    def hide_split(self, pieces: list[str]) -> list[str]:
        """`hide` over the pieces joined, cut again where they were cut; a match
        across a cut goes whole into the piece where it begins."""
        if self._pattern is None or len(pieces) < 2:
            return [self.hide(p) for p in pieces]
        joined = "".join(pieces)
        starts = list(itertools.accumulate([0] + [len(p) for p in pieces[:-1]]))
        out: list[list[str]] = [[] for _ in pieces]

        def piece_at(position: int) -> int:
            return bisect.bisect_right(starts, position) - 1

        def plain(start: int, stop: int) -> None:
            while start < stop:
                index = piece_at(start)
                end = min(stop, starts[index] + len(pieces[index]))
                out[index].append(joined[start:end])
                start = end

        position = 0
        for match in self._pattern.finditer(joined):
            plain(position, match.start())
            out[piece_at(match.start())].append(self._to_placeholder[match.group(0)])
            position = match.end()
        plain(position, len(joined))
        return ["".join(parts) for parts in out]

    def decided(self, pieces: list[str]) -> int:
        """How many of the leading pieces `hide_split` gives their final text
        whatever follows: none may hold a path, or the start of one, that text
        still to come could finish or lengthen (a match waits for the character
        after it, which says whether the path ends there)."""
        joined = "".join(pieces)
        if self._pattern is None:
            return len(pieces)
        undecided = len(joined)
        longest = max(map(len, self._to_placeholder))
        firsts = {path[0] for path in self._to_placeholder}
        for start in range(max(0, len(joined) - longest), len(joined)):
            if joined[start] not in firsts:
                continue  # most text: no path can begin here
            tail = joined[start:]
            if any(path.startswith(tail) for path in self._to_placeholder):
                undecided = start
                break
        spans = [m.span() for m in self._pattern.finditer(joined)]
        undecided = min([undecided] + [a for a, b in spans if a < undecided < b])
        bounds = list(itertools.accumulate([0] + [len(p) for p in pieces]))
        settled = 0
        for count, bound in enumerate(bounds):
            if bound > undecided:
                break
            if not any(a < bound < b for a, b in spans):
                settled = count
        return settled


def _members(message: Any) -> list[Any]:
    return message if isinstance(message, list) else [message]


def _stream_of(member: Any) -> tuple[str, str, bool] | None:
    """(stream key, field, whether bytes) of a streamed-output notification."""
    if not isinstance(member, dict) or not isinstance(member.get("params"), dict):
        return None
    method = member.get("method")
    field = TEXT_STREAMS.get(method) or BYTE_STREAMS.get(method)  # type: ignore[arg-type]
    if field is None or not isinstance(member["params"].get(field), str):
        return None
    key = f"{method} {member['params'].get('requestId')!r}"
    return key, field, method in BYTE_STREAMS


def decode_bytes(data: str) -> str:
    """Base64 of raw bytes as latin-1 text, one char a byte (as is, if not base64)."""
    try:
        return base64.b64decode(data, validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return data


def hide_paths(records: list[Record], substitution: Substitution) -> list[Record]:
    """The records with every per-run path as its placeholder (a new list)."""
    hider = PathHider(substitution)
    out = [ready for record in records for ready in hider.add(record)]
    return out + hider.finish()


class _Entry:
    """A record on its way out, and how many of its stream pieces are undecided."""

    __slots__ = ("held", "record", "size")

    def __init__(self, record: Record, size: int) -> None:
        self.record = record
        self.size = size
        self.held = 0


class _Piece:
    __slots__ = ("entry", "field", "params")

    def __init__(self, params: dict[str, Any], field: str, entry: _Entry) -> None:
        self.params = params
        self.field = field
        self.entry = entry


class _Stream:
    __slots__ = ("anchor", "is_bytes", "pieces")

    def __init__(self, anchor: str, is_bytes: bool) -> None:
        self.anchor = anchor
        self.is_bytes = is_bytes
        self.pieces: list[_Piece] = []


class PathHider:
    """Records in, the same with every per-run path as its placeholder out, in
    order, as soon as each is decided: a recording is written as it goes.

    A stream's piece is decided once no path could begin in it and run on into
    text still to come; until then it, and every record after it, waits. That is
    a piece ending in a path's first characters, never for long: the next piece
    of its stream, its request's reply or `finish` decides it. Past `held_limit`
    bytes waiting (`size` as `add` was told), every stream is decided as if it
    ended there, so memory stays bounded whatever the streams do.

    PTY output is base64 of raw bytes: it is decoded, substituted as bytes
    (latin-1 text, one char a byte; the paths are UTF-8 encoded alike) and
    encoded again."""

    def __init__(self, substitution: Substitution, held_limit: int | None = None) -> None:
        self._substitutions = (substitution, substitution.for_bytes())
        self._held_limit = held_limit
        self._queue: collections.deque[_Entry] = collections.deque()
        self._held_bytes = 0
        self._streams: dict[str, _Stream] = {}

    def add(self, record: Record, size: int = 0) -> list[Record]:
        """`record` taken in; the records now decided, in order."""
        entry = _Entry(record, size)
        self._queue.append(entry)
        self._held_bytes += size
        if record.line is None and getattr(record, "line_base64", None) is None:
            entry.record = self._hidden(record, entry)
        if self._held_limit is not None and self._held_bytes > self._held_limit:
            return self.finish()
        return self._ready()

    def finish(self) -> list[Record]:
        """Every stream decided as ended; the records still waiting."""
        for stream in self._streams.values():
            self._settle(stream, final=True)
        self._streams.clear()
        return self._ready()

    def _hidden(self, record: Record, entry: _Entry) -> Record:
        members = []
        ended: list[str] = []
        touched: list[_Stream] = []
        sub = self._substitutions[0]
        for member in _members(record.message):
            stream = _stream_of(member) if isinstance(record, ServerRecord) else None
            if stream is None:
                members.append(map_strings(member, sub.hide))
                if isinstance(member, dict) and "method" not in member and "id" in member:
                    ended.append(repr(member["id"]))
                continue
            key, field, is_bytes = stream
            params = dict(member["params"])
            if isinstance(params.get(EXACT_TEXT), str):
                # The same piece's exact bytes (it is not UTF-8): never compared, so
                # hidden piece by piece, not across pieces.
                exact = self._substitutions[1].hide(decode_bytes(params[EXACT_TEXT]))
                params[EXACT_TEXT] = base64.b64encode(exact.encode("latin-1")).decode()
            members.append({**member, "params": params})
            entry.held += 1
            anchor = repr(params.get("requestId"))
            target = self._streams.setdefault(key, _Stream(anchor, is_bytes))
            target.pieces.append(_Piece(params, field, entry))
            touched.append(target)
        message = members if isinstance(record.message, list) else members[0]
        for grown in dict.fromkeys(touched):
            self._settle(grown, final=False)
        self._end(ended)
        if isinstance(record, ClientRecord):
            return ClientRecord(waited=record.waited, message=message)
        return ServerRecord(message=message)

    def _end(self, anchors: list[str]) -> None:
        """A request's reply ends its streams: decided, and forgotten."""
        for key, stream in list(self._streams.items()):
            if stream.anchor in anchors:
                self._settle(stream, final=True)
                del self._streams[key]

    def _settle(self, stream: _Stream, final: bool) -> None:
        sub = self._substitutions[1 if stream.is_bytes else 0]
        texts = [
            decode_bytes(p.params[p.field]) if stream.is_bytes else p.params[p.field]
            for p in stream.pieces
        ]
        hidden = sub.hide_split(texts)
        done = len(texts) if final else sub.decided(texts)
        for piece, text in zip(stream.pieces[:done], hidden, strict=False):
            piece.params[piece.field] = (
                base64.b64encode(text.encode("latin-1")).decode() if stream.is_bytes else text
            )
            piece.entry.held -= 1
        del stream.pieces[:done]

    def _ready(self) -> list[Record]:
        out = []
        while self._queue and self._queue[0].held == 0:
            entry = self._queue.popleft()
            self._held_bytes -= entry.size
            out.append(entry.record)
        return out
