"""`bashrpc exec`: a small blocking client for people and scripts.

It starts a server as its child, sends one `bash` request, prints the streamed
chunks as they come, then a one-line summary on stderr, and exits with the
command's exit code (124 on timeout, 130 when cancelled, as shells do).

The server runs in a process group of its own, so a Ctrl-C at the terminal
reaches this client only: it asks the server to abort, which kills the
command's tree and answers with the output so far, and the summary follows
as for any other ending. A second Ctrl-C stops waiting.

The output printed is the command's whole (sanitized) output, byte for byte:
if the stream ever skipped text because this client's own stdout was slow,
the rest is read from the artifact once the command ends.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import subprocess
import sys
import threading
import time
from typing import IO, Any

import msgspec

from protocol import messages
from protocol.envelope import ErrorObject, Request, ServerMessage, encode
from protocol.errors import ErrorCode
from protocol.methods import (
    ARTIFACT_READ_MAX_LIMIT,
    AbortBashParams,
    ArtifactReadParams,
    ArtifactReadResult,
    BashChunk,
    BashParams,
    BashResult,
)
from server.cli import keepalive
from server.cli.keepalive import Keepalive
from server.cli.launcher import REMOTE_PROGRAM, Launcher, LauncherError
from server.cli.options import reprint_options, server_argv

EXIT_TIMED_OUT = 124
EXIT_CANCELLED = 130
EXIT_NO_STATUS = 1
# As for bad command lines: the run cannot happen as asked (no sandbox here).
EXIT_USAGE = 2
# How long the server may take to exit once its stdin is closed.
CHILD_EXIT_SECONDS = 10
# A server started far away (--via) takes a silent client for gone after this
# long, unless --client-timeout says otherwise: a half-open path sends no EOF.
VIA_CLIENT_TIMEOUT_SECONDS = 60.0
_decode_message = msgspec.json.Decoder(ServerMessage).decode
_decode_chunk = msgspec.json.Decoder(BashChunk).decode


def summary_line(result: BashResult, seconds: float, reprint: list[str] | None = None) -> str:
    """`reprint`: the command line that prints the artifact again."""
    parts = [f"exit {result.exit_code if result.exit_code is not None else '-'}"]
    if result.timed_out:
        parts.append("timed out")
    elif result.cancelled:
        parts.append("cancelled")
    parts.append(f"{result.total_lines} lines, {result.total_bytes} bytes")
    if result.truncated:
        kept = f"kept last {result.output_bytes} bytes"
        if result.artifact_id is not None:
            kept += f", full output: artifact://{result.artifact_id}"
            if reprint:
                kept += f" ({shlex.join(reprint)})"
        parts.append(kept)
    parts.append(f"{seconds:.2f}s")
    return "[bashrpc] " + " · ".join(parts)


def interrupted_line(seconds: float) -> str:
    return f"[bashrpc] exit - · cancelled · stopped waiting for the output · {seconds:.2f}s"


def exit_status(result: BashResult) -> int:
    if result.timed_out:
        return EXIT_TIMED_OUT
    if result.cancelled:
        return EXIT_CANCELLED
    if result.exit_code is None:
        return EXIT_NO_STATUS
    return result.exit_code & 0xFF


class ServerError(Exception):
    def __init__(self, text: str, code: int) -> None:
        super().__init__(text)
        self.code = code


class Connection:
    """Requests to the child server over its pipes; notifications go to a handler.
    It pings while it lives (see `keepalive`); the replies are passed over."""

    def __init__(self, child: subprocess.Popen[bytes], ping_interval: float) -> None:
        assert child.stdin is not None and child.stdout is not None
        self._in: IO[bytes] = child.stdin
        self._out: IO[bytes] = child.stdout
        self._ids = itertools.count(1)
        # The keepalive thread writes too: one line at a time.
        self._writing = threading.Lock()
        self._keepalive = Keepalive(self.send, ping_interval)

    def send(self, method: str, params: msgspec.Struct) -> int:
        with self._writing:
            ident = next(self._ids)
            self._in.write(encode(Request(id=ident, method=method, params=params)))
            self._in.flush()
        return ident

    def wait(self, ident: int, on_notification: Any = None) -> msgspec.Raw:
        for line in self._out:
            message = _decode_message(line)
            if message.method is not None:
                if on_notification is not None:
                    on_notification(message)
            elif message.id == ident:
                if message.error is not None:
                    raise _server_error(message.error)
                return message.result
        raise ServerError(messages.EXEC_NO_ANSWER, ErrorCode.INTERNAL_ERROR)

    def close(self) -> None:
        self._keepalive.stop()
        with self._writing:
            self._in.close()


def _server_error(error: ErrorObject) -> ServerError:
    if error.code == ErrorCode.SANDBOX_UNAVAILABLE:
        return ServerError(messages.CLI_ERROR.format(message=error.message), error.code)
    text = messages.EXEC_SERVER_ERROR.format(message=error.message, data=error.data)
    return ServerError(text, error.code)


class Printer:
    """Writes the stream to stdout until a gap, remembering how much it wrote."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.written = 0
        self.gap = False

    def on_notification(self, message: ServerMessage) -> None:
        if message.method != "bash/chunk" or not message.params:
            return
        chunk = _decode_chunk(message.params)
        if chunk.skipped:
            self.gap = True
        if not self.gap:
            self.write(chunk.text.encode())

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()
        self.written += len(data)


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
        printer.write(page.text.encode())
        offset = page.next_offset
    if result.artifact_truncated:
        print(messages.EXEC_OUTPUT_INCOMPLETE, file=sys.stderr)


def run_exec(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        launcher = None if args.via is None else Launcher.parse(args.via)
    except LauncherError as exc:
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_USAGE
    if launcher is not None and getattr(args, "client_timeout", None) is None:
        args.client_timeout = VIA_CLIENT_TIMEOUT_SECONDS
    if launcher is None:
        argv = [sys.executable, "-m", "server", *server_argv(args)]
    else:
        argv = launcher.argv([REMOTE_PROGRAM, *server_argv(args)])
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Out of the terminal's foreground group: Ctrl-C is this client's to handle.
            process_group=0,
        )
    except OSError as exc:
        # Only a launcher can be missing: this Python is running.
        problem = messages.VIA_UNSTARTABLE.format(program=argv[0], reason=exc.strerror)
        print(messages.CLI_ERROR.format(message=problem), file=sys.stderr)
        return EXIT_USAGE
    connection = Connection(child, keepalive.interval_for(args.client_timeout))
    printer = Printer(sys.stdout.buffer)
    try:
        result = _run(connection, printer, BashParams(command=args.command, timeout=args.timeout))
    except ServerError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE if exc.code == ErrorCode.SANDBOX_UNAVAILABLE else EXIT_NO_STATUS
    except KeyboardInterrupt:
        # The second Ctrl-C: stop waiting; the server's tree is ended below.
        print(interrupted_line(time.monotonic() - started), file=sys.stderr)
        return EXIT_CANCELLED
    finally:
        connection.close()
        try:
            child.wait(timeout=CHILD_EXIT_SECONDS)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            child.kill()
            child.wait()
    if (
        result.output
        and not result.output.endswith("\n")
        and (result.cancelled or result.timed_out)
    ):
        printer.out.write(b"\n")
        printer.out.flush()
    reprint = _reprint(args, result, launcher)
    print(summary_line(result, time.monotonic() - started, reprint), file=sys.stderr)
    return exit_status(result)


def _reprint(args: argparse.Namespace, result: BashResult, launcher: Launcher | None) -> list[str]:
    """The command that prints this result's artifact again, where it was made."""
    reprint = [
        REMOTE_PROGRAM,
        "artifact",
        str(result.artifact_id),
        *reprint_options(args, local=launcher is None),
    ]
    return reprint if launcher is None else launcher.argv(reprint)


def _run(connection: Connection, printer: Printer, params: BashParams) -> BashResult:
    ident = connection.send("bash", params)
    try:
        raw = connection.wait(ident, printer.on_notification)
    except KeyboardInterrupt:
        connection.send("abort_bash", AbortBashParams(request_id=ident))
        raw = connection.wait(ident, printer.on_notification)
    result = msgspec.json.decode(raw, type=BashResult)
    if printer.gap:
        fill_gap(connection, printer, result)
    return result
