"""One transcript replayed against a fresh server, and what differs.

The client's messages are sent in the recorded causal order: before each, the
replay waits until this run has received what the recording had when the host
sent it (the replies, each stream's output up to that length, the other
notifications), so a message sent after a reply waits for it and messages
sent back to back stay pipelined. Once all are sent it waits for the rest,
then closes the server's stdin: nothing depends on what a server does at EOF.
A wait that runs out goes on, and the comparison says what was missing.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import msgspec

from bashrpc.protocol.normalization import NORMALIZATION_VERSION, SNAPSHOTS, normalize
from bashrpc.protocol.placeholders import (
    BYTE_STREAMS,
    TEXT_STREAMS,
    Substitution,
    decode_bytes,
    hide_paths,
)
from bashrpc.protocol.transcript import (
    ClientRecord,
    Record,
    ServerRecord,
    Transcript,
    client_line,
    line_record,
)
from bashrpc.protocol.transcriptdiff import differences
from bashrpc.server.cli.pipeserver import PipeServer
from bashrpc.server.cli.runroot import DAEMON_BRIDGE, RunRoot, portable_args
from bashrpc.server.cli.subparsers import DEFAULT_WAIT_SECONDS
from bashrpc.server.daemon import socketpath

DAEMON_STOP_SECONDS = 10.0
DAEMON_POLL_SECONDS = 0.05
# The end of the server's log shown with a mismatch.
LOG_TAIL_LINES = 15


class Outcome(msgspec.Struct, kw_only=True):
    differences: list[str]
    # The transcript as this run would have recorded it (for --update).
    actual: Transcript
    log_tail: list[str]


class Received:
    """What a run has received so far, in the terms a wait asks about."""

    def __init__(self) -> None:
        self.replies: collections.Counter[str] = collections.Counter()
        self.counts: collections.Counter[str] = collections.Counter()
        # Each stream's pieces (PTY bytes as latin-1 text) and their total length.
        self.streams: dict[str, list[str]] = {}
        self.lengths: collections.Counter[str] = collections.Counter()

    def add(self, record: Record) -> None:
        members = record.message if isinstance(record.message, list) else [record.message]
        for member in members:
            if not isinstance(member, dict):
                continue
            method = member.get("method")
            if not isinstance(method, str):
                self.replies[json.dumps(member.get("id"))] += 1
                continue
            params = member.get("params")
            field = TEXT_STREAMS.get(method) or BYTE_STREAMS.get(method)
            if field and isinstance(params, dict) and isinstance(params.get(field), str):
                key = f"{method} {json.dumps(params.get('requestId'))}"
                piece = params[field] if method in TEXT_STREAMS else decode_bytes(params[field])
                self.streams.setdefault(key, []).append(piece)
                self.lengths[key] += len(piece)
            else:
                self.counts[_about(method, params)] += 1

    def hidden_length(self, key: str, substitution: Substitution) -> int:
        """A stream's length with the run's paths as placeholders."""
        if key.split(" ", 1)[0] in BYTE_STREAMS:
            substitution = substitution.for_bytes()
        return len(substitution.hide("".join(self.streams.get(key, []))))

    def covers(self, wanted: Received, substitution: Substitution) -> bool:
        """Whether this holds all of `wanted` (its streams in the placeholders' terms).
        A path is longer than its placeholder, so the cheap raw length comes first."""
        if any(self.replies[k] < n for k, n in wanted.replies.items()):
            return False
        for key, n in wanted.counts.items():
            if self.counts[key] < (min(n, 1) if key.split(" ", 1)[0] in SNAPSHOTS else n):
                return False
        for key, length in wanted.lengths.items():
            if self._settled(key):
                continue
            if self.lengths[key] < length or self.hidden_length(key, substitution) < length:
                return False
        return True

    def _settled(self, key: str) -> bool:
        """A request's stream ends before its reply: once that came, waiting for
        more output (a shorter output than recorded) would only wait out the time."""
        return self.replies[key.split(" ", 1)[1]] > 0


def _about(method: str, params: Any) -> str:
    """A notification's method and the request it is about, if it names one."""
    if not isinstance(params, dict):
        return method
    anchor = params.get("requestId", params.get("progressToken"))
    return f"{method} {json.dumps(anchor)}"


def _client_lines(record: ClientRecord, substitution: Substitution) -> bytes:
    return client_line(record, substitution.show)


def _drive(
    transcript: Transcript, server: PipeServer, received: Received, run: _Run, wait: float
) -> None:
    wanted = Received()
    for record in transcript.records:
        if isinstance(record, ServerRecord):
            wanted.add(record)
            continue
        server.wait(lambda: received.covers(wanted, run.substitution), wait)
        run.actual.append(record)
        if not server.send(_client_lines(record, run.substitution)):
            break
    server.wait(lambda: received.covers(wanted, run.substitution), wait)


class _Run:
    def __init__(self, root: RunRoot) -> None:
        self.substitution = Substitution(root.paths())
        self.actual: list[Record] = []


def stop_daemon(path: Path) -> None:
    """The daemon a bridge of this run started: stopped with the run."""
    pid = socketpath.holder_pid(path)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DAEMON_STOP_SECONDS
    while time.monotonic() < deadline:
        if socketpath.holder_pid(path) is None:
            return
        time.sleep(DAEMON_POLL_SECONDS)
    os.kill(pid, signal.SIGKILL)


def replay(
    transcript: Transcript,
    server_args: list[str] | None = None,
    fixture: Path | None = None,
    wait: float = DEFAULT_WAIT_SECONDS,
) -> Outcome:
    """Run `transcript` against a fresh server in a fresh root, and compare."""
    args = transcript.header.server_args if server_args is None else server_args
    root = RunRoot(fixture)
    try:
        run = _Run(root)
        received = Received()

        def on_line(line: bytes) -> None:
            record = line_record(line, client=False)
            run.actual.append(record)
            received.add(record)

        log = root.root / "server.log"
        with open(log, "wb") as stderr:
            server = PipeServer(
                root.argv(args), root.environment(), root.workspace, stderr, on_line
            )
            try:
                _drive(transcript, server, received, run, wait)
            finally:
                server.close()
                if args[:1] == [DAEMON_BRIDGE]:
                    stop_daemon(root.socket)
        tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        actual = hide_paths(run.actual, run.substitution)
    finally:
        root.remove()
    rules = transcript.header.rules
    found = differences(normalize(transcript.records, rules), normalize(actual, rules))
    header = msgspec.structs.replace(
        transcript.header, normalization=NORMALIZATION_VERSION, server_args=portable_args(args)
    )
    return Outcome(
        differences=found, actual=Transcript(header=header, records=actual), log_tail=tail
    )
