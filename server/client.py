"""`bashrpc exec`: a small blocking client for people and scripts.

It starts a server as its child, sends one `bash` request, prints the streamed
chunks as they come, then a one-line summary on stderr, and exits with the
command's exit code (124 on timeout, 130 when cancelled, as shells do).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import msgspec

from protocol import messages
from protocol.envelope import Request, ServerMessage, encode
from protocol.methods import BashChunk, BashParams, BashResult

EXIT_TIMED_OUT = 124
EXIT_CANCELLED = 130
EXIT_NO_STATUS = 1
_REQUEST_ID = 1


def summary_line(result: BashResult, seconds: float) -> str:
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
        parts.append(kept)
    parts.append(f"{seconds:.2f}s")
    return "[bashrpc] " + " · ".join(parts)


def exit_status(result: BashResult) -> int:
    if result.timed_out:
        return EXIT_TIMED_OUT
    if result.cancelled:
        return EXIT_CANCELLED
    if result.exit_code is None:
        return EXIT_NO_STATUS
    return result.exit_code & 0xFF


def run_exec(args: argparse.Namespace) -> int:
    from server.cli import server_argv

    params = BashParams(command=args.command, timeout=args.timeout)
    if args.session:
        params = msgspec.structs.replace(params, session_id=args.session)
    request = encode(Request(id=_REQUEST_ID, method="bash", params=params))
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "server", *server_argv(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    out = sys.stdout.buffer
    result: BashResult | None = None
    try:
        child.stdin.write(request)
        child.stdin.flush()
        for line in child.stdout:
            message = msgspec.json.decode(line, type=ServerMessage)
            if message.method == "bash/chunk" and message.params:
                chunk = msgspec.json.decode(message.params, type=BashChunk)
                out.write(chunk.text.encode())
                out.flush()
            elif message.id == _REQUEST_ID:
                if message.error is not None:
                    error = message.error
                    print(
                        messages.EXEC_SERVER_ERROR.format(message=error.message, data=error.data),
                        file=sys.stderr,
                    )
                    return EXIT_NO_STATUS
                result = msgspec.json.decode(message.result, type=BashResult)
                break
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if result is None:
        print(messages.EXEC_NO_ANSWER, file=sys.stderr)
        return EXIT_NO_STATUS
    if (
        result.output
        and not result.output.endswith("\n")
        and (result.cancelled or result.timed_out)
    ):
        out.write(b"\n")
    print(summary_line(result, time.monotonic() - started), file=sys.stderr)
    return exit_status(result)
