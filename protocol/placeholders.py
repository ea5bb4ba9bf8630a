"""Per-run paths as placeholders, so a transcript replays at another path.

The recorder writes `<WORKSPACE>`, `<HOME>`, `<ARTIFACTS>`, `<ARTIFACTS_ROOT>`
and `<TMP>` for the directories of its run, in every string of both
directions; replay puts its own directories back into what it sends, and
the same placeholders into what it receives.

Streamed output is substituted over the whole stream, not chunk by chunk, so
a path that a chunk boundary cuts in two is still found; the placeholder then
lands in the chunk where the path began.
"""

from __future__ import annotations

import base64
import binascii
import bisect
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
    """The records with every per-run path as its placeholder (a new list).

    PTY output is base64 of raw bytes: it is decoded, substituted as bytes
    (latin-1 text, one char a byte; the paths are UTF-8 encoded alike) and
    encoded again."""
    streams: dict[str, list[tuple[dict[str, Any], str, bool]]] = {}
    out: list[Record] = []
    for record in records:
        if record.line is not None or getattr(record, "line_base64", None) is not None:
            out.append(record)
            continue
        members = []
        for member in _members(record.message):
            stream = _stream_of(member) if isinstance(record, ServerRecord) else None
            if stream is None:
                members.append(map_strings(member, substitution.hide))
                continue
            key, field, is_bytes = stream
            params = dict(member["params"])
            copy = {**member, "params": params}
            streams.setdefault(key, []).append((params, field, is_bytes))
            members.append(copy)
        message = members if isinstance(record.message, list) else members[0]
        if isinstance(record, ClientRecord):
            out.append(ClientRecord(waited=record.waited, message=message))
        else:
            out.append(ServerRecord(message=message))
    for pieces in streams.values():
        _hide_stream(pieces, substitution)
    return out


def _hide_stream(pieces: list[tuple[dict[str, Any], str, bool]], sub: Substitution) -> None:
    is_bytes = pieces[0][2]
    texts = [decode_bytes(p[f]) if is_bytes else p[f] for p, f, _ in pieces]
    hidden = (sub.for_bytes() if is_bytes else sub).hide_split(texts)
    for (params, field, _), text in zip(pieces, hidden, strict=True):
        params[field] = base64.b64encode(text.encode("latin-1")).decode() if is_bytes else text
