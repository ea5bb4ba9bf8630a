"""`bashrpc record --out FILE [-- SERVER_ARGS...]`: a host's session, as a transcript.

A host spawns this in place of `bashrpc`. It starts the real server with
SERVER_ARGS and passes every line through unchanged, both ways, while it
notes each one. Each line is noted before it is passed on, so the file's order
is the causal order: a host's line comes after every server line it could
have seen. The transcript is written as the session goes, the header first and
each line as soon as the run's paths in it are placeholders
(`bashrpc.protocol.placeholders`), so a long session costs no memory; the file
is its owner's alone (0600): it holds every command and `env` value as sent.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.normalization import NORMALIZATION_VERSION
from bashrpc.protocol.placeholders import PathHider, Substitution
from bashrpc.protocol.transcript import (
    ClientRecord,
    Header,
    Record,
    Rule,
    dump_line,
    line_record,
)
from bashrpc.server.cli.recordsecrets import TranscriptSecrets
from bashrpc.server.cli.runroot import portable_args, recorded_paths

EXIT_USAGE = 2
COPY_BYTES = 256 * 1024
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The most the recorder holds while a path cut by a chunk's end waits for the
# next chunk; past it, what waits is written as it stands.
HELD_BYTES = 8 * 1024 * 1024
PRIVATE_MODE = 0o600


def _request_keys(record: Record) -> list[str]:
    """The ids of the requests in a client line, or of the replies in a server line."""
    members = record.message if isinstance(record.message, list) else [record.message]
    keys = []
    for member in members:
        if not isinstance(member, dict) or "id" not in member:
            continue
        is_request = "method" in member
        if is_request == isinstance(record, ClientRecord):
            keys.append(msgspec.json.encode(member["id"]).decode())
    return keys


class Recorder:
    """Each line as its record, written through `write` as soon as its paths are
    hidden (`PathHider`): what is held is what waits for that, never the session.
    It also tells lockstep from pipelined by the requests still unanswered."""

    def __init__(self, write: Callable[[bytes], object], substitution: Substitution) -> None:
        self._write = write
        self._hider = PathHider(substitution, held_limit=HELD_BYTES)
        self._unanswered: dict[str, int] = {}
        self._lock = threading.Lock()
        # The first write that failed (a full disk): the rest is not written.
        self.failed: OSError | None = None
        self._finished = False
        self._secrets = TranscriptSecrets()

    def client(self, line: bytes) -> None:
        with self._lock:
            record = line_record(line, client=True, waited=not self._unanswered)
            self._secrets.learn(record.message)
            for key in _request_keys(record):
                self._unanswered[key] = self._unanswered.get(key, 0) + 1
            self._put(self._hider.add(record, len(line)))

    def server(self, line: bytes) -> None:
        with self._lock:
            record = line_record(line, client=False)
            for key in _request_keys(record):
                left = self._unanswered.get(key, 0) - 1
                if left > 0:
                    self._unanswered[key] = left
                else:
                    self._unanswered.pop(key, None)
            self._put(self._hider.add(record, len(line)))

    def finish(self) -> None:
        """The session ended: what still waits is written; a line the host sends
        after this is passed on, but not recorded."""
        with self._lock:
            self._put(self._hider.finish())
            self._finished = True

    def _put(self, records: list[Record]) -> None:
        if self.failed is not None or self._finished:
            return
        try:
            for record in records:
                self._write(self._secrets.redact(dump_line(record)))
        except OSError as exc:
            self.failed = exc


def _lines(fd: int) -> Any:
    """The lines read from `fd`, a last one without its newline included."""
    pending = b""
    while True:
        try:
            data = os.read(fd, COPY_BYTES)
        except OSError:
            data = b""
        if not data:
            break
        pending += data
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if pending:
        yield pending


def _upstream(recorder: Recorder, child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None
    try:
        for line in _lines(sys.stdin.fileno()):
            recorder.client(line)
            child.stdin.write(line)
            child.stdin.flush()
    except (BrokenPipeError, ValueError):
        pass
    try:
        child.stdin.close()
    except BrokenPipeError:
        pass


def _downstream(recorder: Recorder, child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    host_reads = True
    for line in _lines(child.stdout.fileno()):
        recorder.server(line)
        if host_reads:
            try:
                _write_all(sys.stdout.fileno(), line)
            except OSError:
                host_reads = False  # the host is gone; the server still ends on its own


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def rules_of(triples: list[list[str]]) -> list[Rule] | str:
    """The --rule triples as Rules, or what is wrong with one."""
    rules = []
    for field, pattern, replacement in triples:
        try:
            re.compile(pattern)
        except re.error as exc:
            return messages.RECORD_BAD_RULE.format(pattern=pattern, reason=exc)
        rules.append(Rule(field=field, pattern=pattern, replacement=replacement))
    return rules


def run_record(args: argparse.Namespace, server_args: list[str]) -> int:
    rules = rules_of(args.rule)
    if isinstance(rules, str):
        print(messages.CLI_ERROR.format(message=rules), file=sys.stderr)
        return EXIT_USAGE
    try:
        # Now, not after the session: a host learns at once that nothing would be kept.
        out = open_private(args.out)
    except OSError as exc:
        reason = messages.RECORD_CANNOT_WRITE.format(path=args.out, reason=exc.strerror)
        print(messages.CLI_ERROR.format(message=reason), file=sys.stderr)
        return EXIT_USAGE
    header = Header(
        normalization=NORMALIZATION_VERSION, server_args=portable_args(server_args), rules=rules
    )
    out.write(dump_line(header))
    recorder = Recorder(out.write, Substitution(recorded_paths(server_args)))
    child = subprocess.Popen(
        [sys.executable, "-m", "bashrpc", *server_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # A group of its own: a Ctrl-C at the terminal reaches it once, forwarded.
        start_new_session=True,
    )
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, lambda received, _frame: child.send_signal(received))
    upstream = threading.Thread(target=_upstream, args=(recorder, child), daemon=True)
    upstream.start()
    try:
        _downstream(recorder, child)
    finally:
        status = child.wait()
        recorder.finish()
        try:
            out.close()
        except OSError as exc:
            recorder.failed = recorder.failed or exc
    if recorder.failed is not None:
        reason = messages.RECORD_CANNOT_WRITE.format(path=args.out, reason=recorder.failed.strerror)
        print(messages.CLI_ERROR.format(message=reason), file=sys.stderr)
        return status or 1
    return status


def open_private(path: Path) -> BinaryIO:
    """`path` emptied for writing, readable by its owner alone: a transcript
    holds every command and `env` value of the session as sent."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_MODE)
    os.fchmod(fd, PRIVATE_MODE)  # a file that was there keeps its mode otherwise
    return open(fd, "wb")
