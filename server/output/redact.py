"""Secrets out of a byte stream, split-safe (sans-I/O).

A `SecretTable` is compiled once from named values and token formats; a
`Redactor` per stream replaces each secret with `[REDACTED:NAME]` and counts
them by name. Output arrives in arbitrary reads, so the stream holds back
what may be the start of a secret at its edge: for values, the longest
suffix that begins one of their forms (at most the longest form less a
byte); for a token format, a match that may still grow, or an anchor whose
line is not over yet, within the format's bound. Everything held is let go
at `finish`. A stream that may not wait (a quiet command) takes the held
bytes early (`release`); they stay carried, so the kept copy still gets every
secret whole and the stream the rest of one they begin as a marker. Found
secrets that overlap, or one inside another, become one
redaction, named for the one that starts first (the longer at a tie, then a value's
name before a format's).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bashrpc.protocol import messages
from bashrpc.server.output.matcher import Hit, Matcher, matcher
from bashrpc.server.output.secretforms import DEFAULT_FORMATS, TokenFormat, forms

Span = tuple[int, int, str]
# The longest look-behind of a token format.
_BEHIND = 8


@dataclass(frozen=True)
class _Anchor:
    token: TokenFormat
    length: int


class TableSource(Protocol):
    """Where a stream finds its table: a fixed one, or one that follows the values
    registered while the stream runs (`SecretBook.live`)."""

    def current(self) -> SecretTable: ...


class SecretTable:
    """Named values and token formats, compiled for every stream to share."""

    def __init__(
        self,
        values: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = (),
        formats: Sequence[TokenFormat] = DEFAULT_FORMATS,
    ) -> None:
        named = list(values.items()) if isinstance(values, Mapping) else list(values)
        literal_names: dict[bytes, str] = {}
        for name, value in named:
            for form in forms(value):
                literal_names.setdefault(form, name)
        self._names = list(literal_names.values())
        anchored = [token for token in formats if token.anchors]
        self._anywhere = tuple(token for token in formats if not token.anchors)
        literals = list(literal_names)
        self._anchors: list[_Anchor] = []
        for token in anchored:
            for anchor in token.anchors:
                literals.append(anchor)
                self._anchors.append(_Anchor(token, len(anchor)))
        self._values = len(literal_names)
        self._matcher: Matcher | None = matcher(literals) if literals else None
        longest = max((len(literal) for literal in literals), default=0)
        self._prefixes = frozenset(
            literal[:cut] for literal in literals for cut in range(1, len(literal))
        )
        self._alphabet = bytes(sorted({byte for literal in literals for byte in literal}))
        self._secret_bytes = frozenset(self._alphabet)
        self._longest_prefix = max(longest - 1, 0)
        self.max_hold = max(
            [self._longest_prefix, *(token.max_len for token in formats)], default=0
        )
        self.empty = not literals and not self._anywhere
        self.secrets = len(named)

    def current(self) -> SecretTable:
        return self

    def quiet(self, data: bytes) -> tuple[list[Hit], int | None]:
        """The matcher's hits in `data`, and when there is none (and no format that
        has no anchor) how many bytes at its end may begin a secret: the common
        read, which needs nothing else."""
        hits = self._matcher.scan(data) if self._matcher is not None else []
        if hits or self._anywhere:
            return hits, None
        return hits, self._held_suffix(data)

    def spans(
        self, data: bytes, final: bool, behind: bytes = b"", hits: list[Hit] | None = None
    ) -> tuple[list[Span], int]:
        """Secrets found in `data` and where the part that may still change begins
        (`len(data)` when nothing is held); `behind`: the bytes before `data`, for
        the formats' look-behind; `hits`: the matcher's, when `quiet` found them."""
        values: list[Span] = []
        spans: list[Span] = []
        hold = len(data) if final else len(data) - self._held_suffix(data)
        if hits is None:
            hits = self._matcher.scan(data) if self._matcher is not None else []
        if hits:
            for start, end, ident in hits:
                if ident < self._values:
                    values.append((start, end, self._names[ident]))
                    continue
                token = self._anchors[ident - self._values].token
                if start < _BEHIND and behind:
                    hold = self._token_behind(data, behind, start, token, final, spans, hold)
                else:
                    hold = self._token(data, start, token, final, spans, hold)
        for token in self._anywhere:
            for found in token.regex.finditer(data):
                hold = self._add_match(data, found, token, final, spans, hold)
        # Whatever order the matcher found them in, a tie is named alike: for the
        # value (the host's own name) before a format, then by the format's name.
        spans.sort(key=lambda span: span[2])
        return values + spans, hold

    def _held_suffix(self, data: bytes) -> int:
        """The longest suffix that begins a value's form or an anchor."""
        if not data or data[-1] not in self._secret_bytes:
            # The common read ends in a byte no secret has (a line feed).
            return 0
        edge = data[-self._longest_prefix :] if self._longest_prefix else b""
        run = len(edge) - len(edge.rstrip(self._alphabet))
        prefixes = self._prefixes
        for size in range(run, 0, -1):
            if edge[-size:] in prefixes:
                return size
        return 0

    def _token(
        self, data: bytes, start: int, token: TokenFormat, final: bool, spans: list[Span], hold: int
    ) -> int:
        found = token.regex.match(data, start)
        if found is not None:
            return self._add_match(data, found, token, final, spans, hold)
        if final or len(data) - start >= token.max_len:
            return hold
        if token.one_line and data.find(b"\n", start) >= 0:
            return hold
        return min(hold, start)

    def _token_behind(
        self,
        data: bytes,
        behind: bytes,
        start: int,
        token: TokenFormat,
        final: bool,
        spans: list[Span],
        hold: int,
    ) -> int:
        """A token at the start of `data`, tried with the bytes before it (a copy,
        made only for an anchor this close to the start)."""
        shift = len(behind)
        found: list[Span] = []
        held = self._token(behind + data, start + shift, token, final, found, hold + shift)
        spans.extend((max(s - shift, 0), e - shift, name) for s, e, name in found if e > shift)
        return max(held - shift, 0)

    @staticmethod
    def _add_match(
        data: bytes,
        found: re.Match[bytes],
        token: TokenFormat,
        final: bool,
        spans: list[Span],
        hold: int,
    ) -> int:
        groups = [
            (found.start(group), found.end(group), group)
            for group, value in found.groupdict().items()
            if value is not None
        ]
        spans.extend(groups or [(found.start(), found.end(), token.name)])
        # A match may grow with the next read while it reaches the edge, or while its
        # line goes on (a key's secret may follow on the same line).
        start = found.start()
        if final or len(data) - start >= token.max_len:
            return hold
        if found.end() == len(data) or (token.one_line and data.find(b"\n", start) < 0):
            return min(hold, start)
        return hold


class Redactor:
    """One stream's redaction: bytes in, bytes out, the same for every split."""

    def __init__(self, table: TableSource) -> None:
        self._source = table
        self._table = table.current()
        self._carry = b""
        # How much of the carry a stream already has (`release`): it is still
        # carried, for the kept copy and for what the next read completes.
        self._released = 0
        # Bytes held back from the stream (and not `release`d): kept as it changes,
        # since a pipeline asks after every read.
        self.held = 0
        # The last bytes let go, for the formats' look-behind (`_START`).
        self._behind = b""
        self.counts: Counter[str] = Counter()
        # Line feeds inside what was redacted (a private key's lines), for line counts.
        self.lines_removed = 0

    def feed(self, data: bytes) -> bytes:
        """The bytes let go, split-safe: what a kept copy (a result, an artifact) takes."""
        return self.feed_both(data)[0]

    def feed_both(self, data: bytes) -> tuple[bytes, bytes]:
        """The bytes let go for a kept copy, and for a stream that was given the held
        bytes early (`release`): the same bytes unless it was."""
        # A value registered meanwhile counts from this read on.
        self._table = table = self._source.current()
        if self._carry:
            data = self._carry + data
        elif table.empty:
            return data, data
        hits, held = table.quiet(data)
        if held is None:
            return self._run(data, False, hits)
        # Nothing found: all but the end that may begin a secret goes on, uncopied.
        edge = len(data) - held
        kept = data[:edge] if held else data
        if self._released:
            return kept, self._let_go(data, edge, kept)
        # The common read, `_let_go` inline: nothing released, the stream takes
        # what the kept copy does.
        self._carry = data[edge:] if held else b""
        self.held = held
        self._behind = (
            data[edge - _BEHIND : edge]
            if edge >= _BEHIND
            else (self._behind + data[:edge])[-_BEHIND:]
        )
        return kept, kept

    def finish(self) -> bytes:
        return self.finish_both()[0]

    def finish_both(self) -> tuple[bytes, bytes]:
        data = self._carry
        return self._run(data, final=True) if data else (b"", b"")

    def release(self) -> bytes:
        """The held bytes for a stream that must not wait longer (a quiet command),
        redacted of every secret they hold whole. They stay carried: the kept copy
        still waits for them, and the next read still redacts the rest of a secret
        they begin (its first piece, at most the longest secret less a byte, is
        then in the stream only)."""
        if not self.held:
            return b""
        data = self._carry
        spans = _merge(self._table.spans(data, True, self._behind)[0])
        out = self._render(data, spans, self._released, len(data), count=False)
        self._released = len(data)
        self.held = 0
        return out

    def _let_go(self, data: bytes, edge: int, kept: bytes) -> bytes:
        """Carry `data` from `edge` on; the stream's part of `kept` (`data[:edge]`)."""
        self._carry = data[edge:] if edge < len(data) else b""
        self._behind = (
            data[edge - _BEHIND : edge]
            if edge >= _BEHIND
            else (self._behind + data[:edge])[-_BEHIND:]
        )
        released, self._released = self._released, max(self._released - edge, 0)
        self.held = len(self._carry) - self._released
        if not released:
            return kept
        return data[released:edge] if edge > released else b""

    def _run(self, data: bytes, final: bool, hits: list[Hit] | None = None) -> tuple[bytes, bytes]:
        spans, hold = self._table.spans(data, final, self._behind, hits)
        # Nothing is held longer than the longest secret can be.
        cap = len(data) - self._table.max_hold
        hold = max(hold, cap, 0)
        kept: list[Span] = []
        for start, end, name in _merge(spans):
            if end <= hold:
                kept.append((start, end, name))
                continue
            if start < hold:
                # A secret reaching into the held part waits with it (it may join a
                # longer one), unless waiting would pass the bound: then it goes now.
                if start >= cap and not final:
                    hold = start
                else:
                    kept.append((start, end, name))
            break
        edge = max(hold, kept[-1][1]) if kept else hold
        released = self._released
        if not kept:
            out = data if edge == len(data) else data[:edge]
            return out, self._let_go(data, edge, out)
        out = self._render(data, kept, 0, edge, count=True)
        self._let_go(data, edge, out)
        if not released:
            return out, out
        return out, self._render(data, kept, released, edge, count=False)

    def _render(
        self, data: bytes, spans: list[Span], start: int, edge: int, *, count: bool
    ) -> bytes:
        """`data[start:edge]` with each span in it replaced by its marker (a span
        that began before `start` by one marker at `start`)."""
        out: list[bytes] = []
        at = start
        for first, end, name in spans:
            if end <= start or first >= edge:
                continue
            out.append(data[at:first] if first > at else b"")
            out.append(messages.REDACTED.format(name=name).encode())
            if count:
                self.counts[name] += 1
                self.lines_removed += data.count(b"\n", first, end)
            at = end
        out.append(data[at:edge])
        return b"".join(out)


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping spans as one, named for the first (the longest at a tie)."""
    if not spans:
        return spans
    spans.sort(key=lambda span: (span[0], -span[1]))
    merged: list[Span] = [spans[0]]
    for start, end, name in spans[1:]:
        last_start, last_end, last_name = merged[-1]
        if start < last_end:
            if end > last_end:
                merged[-1] = (last_start, end, last_name)
        else:
            merged.append((start, end, name))
    return merged


def redact_text(table: SecretTable, text: str) -> tuple[str, Counter[str]]:
    """A whole text at once (a screen, a log line)."""
    redactor = Redactor(table)
    data = text.encode("utf-8", "surrogateescape")
    out = redactor.feed(data) + redactor.finish()
    return out.decode("utf-8", "replace"), redactor.counts


def redact_rows(table: SecretTable, lines: Sequence[str], cols: int) -> list[str]:
    """A terminal's screen rows, a secret caught where it wraps from a full row
    to the next: its marker stands where it begins, its rest is cut from the rows."""
    starts: list[int] = []
    joined = ""
    for index, line in enumerate(lines):
        if index and len(lines[index - 1]) < cols:
            joined += "\n"
        starts.append(len(joined))
        joined += line
    data = joined.encode("utf-8", "surrogateescape")
    spans = _merge(table.spans(data, final=True)[0])
    if not spans:
        return list(lines)
    # Byte offsets back to characters.
    char_at = [0] * (len(data) + 1)
    offset = 0
    for index, char in enumerate(joined):
        width = len(char.encode("utf-8", "surrogateescape"))
        for byte in range(offset, offset + width):
            char_at[byte] = index
        offset += width
    char_at[len(data)] = len(joined)
    chars = [(char_at[start], char_at[end], name) for start, end, name in spans]
    out: list[str] = []
    for line, start in zip(lines, starts, strict=True):
        end = start + len(line)
        row, at = "", start
        for first, last, name in chars:
            if last <= at or first >= end:
                continue
            row += joined[at:first] if first > at else ""
            if first >= start:
                row += messages.REDACTED.format(name=name)
            at = min(last, end)
        out.append(row + joined[at:end])
    return out
