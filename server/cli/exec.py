"""`bashrpc exec`: a small blocking client for people and scripts.

It starts a server as its child, sends one `bash` request, prints the streamed
chunks as they come, then a one-line summary on stderr, and exits with the
command's exit code (124 on timeout, 130 when cancelled, as shells do).

The server runs in a process group of its own, so a Ctrl-C at the terminal
reaches this client only: it asks the server to abort, which kills the
command's tree and answers with the output so far, and the summary follows
as for any other ending. A second Ctrl-C stops waiting. When the reader of
stdout goes away (`exec … | head`), the command is aborted the same way and
this client dies of SIGPIPE, silently, as a Unix tool in a pipeline does.

The output printed is the command's whole (sanitized) output, byte for byte,
bytes that are not UTF-8 included (`textBase64`): if the stream ever skipped
text because this client's own stdout was slow, the rest is read from the
artifact once the command ends.

The command's stdin is empty, as for every `bash` request: this client's own
stdin is never read, so one that may hold input (a pipe, a socket, a file
with bytes left) is refused rather than silently dropped.
"""

from __future__ import annotations

import argparse
import os
import shlex
import stat
import subprocess
import sys
import time

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import AbortBashParams, BashParams, BashResult
from bashrpc.server.cli import keepalive
from bashrpc.server.cli.client import Connection, NoAnswer, ServerError
from bashrpc.server.cli.launcher import REMOTE_PROGRAM, Launcher, LauncherError
from bashrpc.server.cli.options import reprint_options, server_argv
from bashrpc.server.cli.printer import Printer, ReaderGone, fill_gap
from bashrpc.server.cli.sigpipe import die_of_sigpipe

EXIT_TIMED_OUT = 124
EXIT_CANCELLED = 130
EXIT_NO_STATUS = 1
# A bad command line, or a run that cannot happen as asked (no sandbox here).
EXIT_USAGE = 2
# A shell's status for a command it found nowhere on its PATH.
EXIT_NOT_FOUND = 127
# How long the server may take to exit once its stdin is closed.
CHILD_EXIT_SECONDS = 10
# A server started far away (--via) takes a silent client for gone after this
# long, unless --client-timeout says otherwise: a half-open path sends no EOF.
VIA_CLIENT_TIMEOUT_SECONDS = 60.0
STDIN_FD = 0


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


class Refused(Exception):
    """The run cannot start as asked: a usage error, said in one line."""


def stdin_kind() -> str | None:
    """What this process's stdin is, when the command would lose what it holds:
    a pipe, a socket or a file with bytes left. A terminal, /dev/null or an
    empty file is None. Told by its type, never by what has arrived so far, so
    `echo hi | bashrpc exec cat` is refused however soon `echo` writes."""
    try:
        mode = os.fstat(STDIN_FD).st_mode
    except OSError:
        return None  # closed: nothing to lose
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        try:
            left = os.fstat(STDIN_FD).st_size - os.lseek(STDIN_FD, 0, os.SEEK_CUR)
        except OSError:
            left = 1
        return "a file" if left > 0 else None
    return None


def run_exec(args: argparse.Namespace) -> int:
    started = time.monotonic()
    kind = stdin_kind()
    if kind is not None:
        print(
            messages.CLI_ERROR.format(message=messages.EXEC_STDIN_REFUSED.format(kind=kind)),
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        launcher = None if args.via is None else Launcher.parse(args.via)
        child = _start(args, launcher)
    except (LauncherError, Refused) as exc:
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_USAGE
    connection = Connection(child, keepalive.interval_for(args.client_timeout))
    printer = Printer(sys.stdout.buffer)
    outcome: BashResult | ServerError | KeyboardInterrupt | ReaderGone
    try:
        outcome = _run(connection, printer, BashParams(command=args.command, timeout=args.timeout))
    except (ServerError, KeyboardInterrupt, ReaderGone) as exc:
        outcome = exc
    status = _stop(connection, child)
    if isinstance(outcome, ReaderGone):
        die_of_sigpipe()
    if isinstance(outcome, KeyboardInterrupt):
        # The second Ctrl-C: stopped waiting; the server's tree is ended.
        print(interrupted_line(time.monotonic() - started), file=sys.stderr)
        return EXIT_CANCELLED
    if isinstance(outcome, ServerError):
        if isinstance(outcome, NoAnswer) and launcher is not None and status == EXIT_NOT_FOUND:
            found_none = messages.VIA_NOT_FOUND.format(program=REMOTE_PROGRAM, launcher=args.via)
            print(messages.CLI_ERROR.format(message=found_none), file=sys.stderr)
            return EXIT_USAGE
        return _failed(outcome, status)
    reprint = _reprint(args, outcome, launcher)
    print(summary_line(outcome, time.monotonic() - started, reprint), file=sys.stderr)
    return exit_status(outcome)


def _start(args: argparse.Namespace, launcher: Launcher | None) -> subprocess.Popen[bytes]:
    if launcher is not None and getattr(args, "client_timeout", None) is None:
        args.client_timeout = VIA_CLIENT_TIMEOUT_SECONDS
    if launcher is None:
        argv = [sys.executable, "-m", "bashrpc", *server_argv(args)]
    else:
        argv = launcher.argv([REMOTE_PROGRAM, *server_argv(args)])
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Out of the terminal's foreground group: Ctrl-C is this client's to handle.
            process_group=0,
        )
    except OSError as exc:
        # Only a launcher can be missing: this Python is running.
        problem = messages.VIA_UNSTARTABLE.format(program=argv[0], reason=exc.strerror)
        raise Refused(problem) from None


def _stop(connection: Connection, child: subprocess.Popen[bytes]) -> int:
    """End the conversation and the server; its exit status."""
    connection.close()
    try:
        return child.wait(timeout=CHILD_EXIT_SECONDS)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        child.kill()
        return child.wait()


def _failed(error: ServerError, server_status: int) -> int:
    """A server that refused its command line (exit 2) has said why on stderr,
    in one line: this client adds none, and exits 2 as well."""
    if isinstance(error, NoAnswer) and server_status == EXIT_USAGE:
        return EXIT_USAGE
    print(str(error), file=sys.stderr)
    return EXIT_USAGE if error.code == ErrorCode.SANDBOX_UNAVAILABLE else EXIT_NO_STATUS


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
    except (KeyboardInterrupt, ReaderGone) as stop:
        # Ctrl-C, or the reader went away: the command's tree is killed either way.
        connection.send("abort_bash", AbortBashParams(request_id=ident))
        raw = connection.wait(ident, printer.on_notification)
        if isinstance(stop, ReaderGone):
            raise
    result = msgspec.json.decode(raw, type=BashResult)
    if printer.gap:
        fill_gap(connection, printer, result)
    printer.end_open_line(result)
    return result
