"""The published normalization of transcripts, version 1: what replay compares.

A transcript's records become one `Normalized` value; two runs match when
their values are equal. Version 1 (the header's `normalization`):

- Each request gathers what the server said about it: its reply (`result` or
  `error`) and its notifications. Output is joined per stream: the `text`s of
  its `bash/chunk`s, the bytes of its `pty/output`s (shown as UTF-8), so the
  number of chunks and where they were cut never matter. The `skipped` counts
  are summed; the skip notice stays in the text with its byte count.
- Snapshots of a running tool call (`tool/update`, `notifications/progress`,
  anchored by `requestId` and `progressToken`) are throttled, so only the
  last of each is kept.
- A request's notifications come before its reply: one after it is counted
  as `lateNotifications`. `seq` is checked for order, not value: a stream
  whose seqs do not increase gets `seqOutOfOrder`. A `bash/attach` owns the
  chunks it replays of the request it names.
- Volatile values become placeholders: `pid` fields `<PID>`; durations
  `<DURATION>`; ISO 8601 timestamps in any string `<TIMESTAMP>`; the
  server's version in `initialize`'s `serverInfo` (and in the `_meta` key
  `io.modelcontextprotocol/serverInfo` of 2026-07-28 results) `<VERSION>`. Artifact ids
  (`artifactId`, `artifact://N`, `artifact N`, the `id` of `artifact/read`)
  are renumbered 1, 2, ... in order of appearance. A path's placeholder is
  not as long as the path, so in a request whose messages hold one, byte
  counts and offsets (`*Bytes`, `offset`, `nextOffset`, `progress`, `size`,
  `skipped`) become `<BYTES>`.
- Replies to requests sent in lockstep are compared in order (`lockstepOrder`);
  requests sent pipelined are matched by id, as a set.
- The header's rules run last, each on the strings at its field.

Paths are placeholders already (`bashrpc.protocol.placeholders`).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from bashrpc.protocol.transcript import ClientRecord, Record, Rule

NORMALIZATION_VERSION = 1

PID = "<PID>"
DURATION = "<DURATION>"
# A `seq` left in a value (a request's count of chunks in `session/list`).
SEQ = "<SEQ>"
SEQ_KEY = "seq"
# The server's own version (initialize's serverInfo): an upgrade alone changes no transcript.
VERSION = "<VERSION>"
# `initialize`'s, and the `_meta` key that names the server in 2026-07-28 results.
SERVER_INFO = ("serverInfo", "io.modelcontextprotocol/serverInfo")
TIMESTAMP = "<TIMESTAMP>"
PID_KEYS = re.compile(r"^(pid|[a-z]+Pid)$")
DURATION_KEYS = re.compile(r"^(duration|elapsed|[a-z]*(Duration|Elapsed))(Ms|Seconds)?$")
TIMESTAMP_PATTERN = re.compile(
    r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?\b"
)
BYTES = "<BYTES>"
SIZE_KEYS = re.compile(r"^([a-z]*Bytes|offset|nextOffset|progress|size|skipped)$")
PATH_PLACEHOLDER = re.compile(r"<(WORKSPACE|HOME|ARTIFACTS|ARTIFACTS_ROOT|TMP)>")
ARTIFACT_MENTION = re.compile(r"(artifact://|\bartifact )(\d+)")
ARTIFACT_ID_KEYS = ("artifactId",)
ARTIFACT_READ = "artifact/read"
ATTACH = "bash/attach"
TEXT_STREAMS = {"bash/chunk": "text"}
BYTE_STREAMS = {"pty/output": "data"}
SNAPSHOTS = {"tool/update": "requestId", "notifications/progress": "progressToken"}

# A normalized request: field -> JSON value. A Normalized run: see `normalize`.
Entry = dict[str, Any]


def _key(ident: Any) -> str:
    """Ids of different JSON types differ (1 is not "1")."""
    return json.dumps(ident)


class _Request:
    def __init__(self, ident: Any, method: Any, waited: bool, label: str) -> None:
        self.ident, self.method, self.waited, self.label = ident, method, waited, label
        self.answered = False
        self.entry: Entry = {"method": method}
        self.texts: dict[str, list[str]] = {}
        self.last_seq: dict[str, int] = {}


class _Artifacts:
    """Artifact ids in order of appearance."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def canon(self, number: int) -> int:
        return self._seen.setdefault(number, len(self._seen) + 1)

    def in_text(self, text: str) -> str:
        return ARTIFACT_MENTION.sub(lambda m: m.group(1) + str(self.canon(int(m.group(2)))), text)

    def walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.in_text(value)
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, dict):
            return {
                k: self.canon(v)
                if k in ARTIFACT_ID_KEYS and isinstance(v, int) and not isinstance(v, bool)
                else self.walk(v)
                for k, v in value.items()
            }
        return value


class _Run:
    """One pass over the records, in file order."""

    def __init__(self) -> None:
        self.requests: list[_Request] = []
        self.open: dict[str, list[_Request]] = {}
        self.by_token: dict[str, _Request] = {}
        self.seen_ids: dict[str, int] = {}
        self.artifacts = _Artifacts()
        self.orphans: list[Any] = []
        self.connection: list[Any] = []
        self.reply_order: list[str] = []

    def client(self, member: Any, waited: bool) -> None:
        if not isinstance(member, dict) or "id" not in member or "method" not in member:
            return
        ident = member["id"]
        key = _key(ident)
        count = self.seen_ids[key] = self.seen_ids.get(key, 0) + 1
        label = key if count == 1 else f"{key}#{count}"
        request = _Request(ident, member.get("method"), waited, label)
        params = member.get("params")
        if isinstance(params, dict):
            if request.method == ARTIFACT_READ and isinstance(params.get("id"), int):
                self.artifacts.canon(params["id"])
            meta = params.get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                self.by_token[_key(meta["progressToken"])] = request
            if request.method == ATTACH:
                request.entry["attachTo"] = params.get("requestId")
        self.requests.append(request)
        self.open.setdefault(key, []).append(request)

    def server(self, member: Any) -> None:
        if not isinstance(member, dict):
            self.orphans.append(member)
        elif isinstance(member.get("method"), str):
            self.notification(member)
        else:
            self.reply(member)

    def reply(self, member: dict[str, Any]) -> None:
        waiting = self.open.get(_key(member.get("id")))
        if not waiting:
            self.orphans.append(self.artifacts.walk(member))
            return
        request = waiting.pop(0)
        request.answered = True
        if request.waited:
            self.reply_order.append(request.label)
        for field in ("result", "error"):
            if field in member:
                value = self.artifacts.walk(member[field])
                if request.method == ARTIFACT_READ and field == "result":
                    value = _canon_read(value, self.artifacts)
                request.entry[field] = value

    def owner(self, method: str, params: dict[str, Any]) -> _Request | None:
        """The request a notification is about. While a `bash/attach` follows a
        request, a chunk whose seq the request itself has had is the attach's."""
        if method in SNAPSHOTS and method != "tool/update":
            return self.by_token.get(_key(params.get(SNAPSHOTS[method])))
        key = _key(params.get("requestId"))
        matching = [r for r in self.requests if _key(r.ident) == key]
        live = [r for r in matching if not r.answered]
        attaches = [
            r
            for r in self.requests
            if r.method == ATTACH and not r.answered and _key(r.entry.get("attachTo")) == key
        ]
        if live and attaches:
            seq = params.get("seq")
            had = live[0].last_seq.get(method)
            if isinstance(seq, int) and had is not None and seq <= had:
                return attaches[0]
        if live:
            return live[0]
        return attaches[0] if attaches else (matching[-1] if matching else None)

    def notification(self, member: dict[str, Any]) -> None:
        method, params = member["method"], member.get("params")
        if not isinstance(params, dict):
            self.connection.append(self.artifacts.walk(member))
            return
        request = self.owner(method, params)
        if request is None:
            self.connection.append(self.artifacts.walk(member))
            return
        if request.answered:
            request.entry["lateNotifications"] = request.entry.get("lateNotifications", 0) + 1
        if method in TEXT_STREAMS or method in BYTE_STREAMS:
            self.stream(request, method, params)
        elif method in SNAPSHOTS:
            request.entry.setdefault("progress", {})[method] = self.artifacts.walk(params)
        else:
            request.entry.setdefault("notifications", []).append(self.artifacts.walk(member))

    def stream(self, request: _Request, method: str, params: dict[str, Any]) -> None:
        field = TEXT_STREAMS.get(method) or BYTE_STREAMS[method]
        piece = params.get(field)
        if not isinstance(piece, str):
            piece = ""
        if method in BYTE_STREAMS:
            piece = _bytes_as_latin1(piece)
        request.texts.setdefault(method, []).append(piece)
        seq = params.get("seq")
        if isinstance(seq, int):
            if seq <= request.last_seq.get(method, -1) and method in request.last_seq:
                request.entry["seqOutOfOrder"] = True
            request.last_seq[method] = seq
        skipped = params.get("skipped")
        if isinstance(skipped, int) and skipped:
            request.entry["skipped"] = request.entry.get("skipped", 0) + skipped


def _canon_read(value: Any, artifacts: _Artifacts) -> Any:
    if isinstance(value, dict) and isinstance(value.get("id"), int):
        return {**value, "id": artifacts.canon(value["id"])}
    return value


def _bytes_as_latin1(data: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return data


def _members(message: Any) -> list[Any]:
    return message if isinstance(message, list) else [message]


def normalize(records: list[Record], rules: list[Rule] | None = None) -> dict[str, Any]:
    """The comparable value of a run: `requests` (label -> entry), `lockstepOrder`,
    and, when there are any, `connection` (notifications of no request) and
    `unmatched` (replies to no request)."""
    run = _Run()
    for record in records:
        if record.line is not None:
            continue
        for member in _members(record.message):
            if isinstance(record, ClientRecord):
                run.client(member, record.waited)
            else:
                run.server(member)
    requests: dict[str, Entry] = {}
    for request in run.requests:
        entry = request.entry
        if request.texts:
            entry["output"] = {m: _joined(m, pieces, run) for m, pieces in request.texts.items()}
        if not request.answered:
            entry["noReply"] = True
        entry.pop("attachTo", None)
        requests[request.label] = _path_sized(_volatile(entry))
    normalized: dict[str, Any] = {"requests": requests, "lockstepOrder": run.reply_order}
    if run.connection:
        normalized["connection"] = _volatile(run.connection)
    if run.orphans:
        normalized["unmatched"] = _volatile(run.orphans)
    return apply_rules(normalized, rules or [])


def _joined(method: str, pieces: list[str], run: _Run) -> str:
    text = "".join(pieces)
    if method in BYTE_STREAMS:
        text = text.encode("latin-1").decode("utf-8", errors="replace")
    return run.artifacts.in_text(text)


def _volatile(value: Any) -> Any:
    """Pids, durations and timestamps as placeholders."""
    if isinstance(value, str):
        return TIMESTAMP_PATTERN.sub(TIMESTAMP, value)
    if isinstance(value, list):
        return [_volatile(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if PID_KEYS.match(k) and isinstance(v, int) and not isinstance(v, bool):
                out[k] = PID
            elif k == SEQ_KEY and isinstance(v, int):
                out[k] = SEQ
            elif k in SERVER_INFO and isinstance(v, dict) and "version" in v:
                out[k] = {**_volatile(v), "version": VERSION}
            elif DURATION_KEYS.match(k) and isinstance(v, (int, float)):
                out[k] = DURATION
            else:
                out[k] = _volatile(v)
        return out
    return value


def _has_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return PATH_PLACEHOLDER.search(value) is not None
    if isinstance(value, list):
        return any(_has_placeholder(v) for v in value)
    if isinstance(value, dict):
        return any(_has_placeholder(v) for v in value.values())
    return False


def _sizes_hidden(value: Any) -> Any:
    if isinstance(value, list):
        return [_sizes_hidden(v) for v in value]
    if isinstance(value, dict):
        return {
            k: BYTES if SIZE_KEYS.match(k) and isinstance(v, int) else _sizes_hidden(v)
            for k, v in value.items()
        }
    return value


def _path_sized(entry: Entry) -> Entry:
    """A path's placeholder is not as long as the path: where one stands in a
    request's output, its byte counts and offsets say nothing portable."""
    return _sizes_hidden(entry) if _has_placeholder(entry) else entry


def paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any, Callable[[Any], None]]]:
    """(dotted path without list indices, string, setter) of every string in `value`."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return
    for k, v in items:
        here = prefix if isinstance(value, list) else (f"{prefix}.{k}" if prefix else str(k))
        if isinstance(v, str):

            def put(new: Any, into: Any = value, at: Any = k) -> None:
                into[at] = new

            yield here, v, put
        else:
            yield from paths(v, here)


def apply_rules(normalized: dict[str, Any], rules: list[Rule]) -> dict[str, Any]:
    """The host's rules, each on the strings at its field, in its method's requests."""
    if not rules:
        return normalized
    compiled = [(rule, re.compile(rule.pattern)) for rule in rules]
    scopes: list[tuple[str | None, Any]] = [
        (entry.get("method"), entry) for entry in normalized["requests"].values()
    ]
    scopes += [(None, normalized.get("connection", [])), (None, normalized.get("unmatched", []))]
    for method, scope in scopes:
        for field, text, put in list(paths(scope)):
            for rule, pattern in compiled:
                if rule.method is not None and rule.method != method:
                    continue
                if fnmatch.fnmatchcase(field, rule.field):
                    text = pattern.sub(rule.replacement, text)
            put(text)
    return normalized
