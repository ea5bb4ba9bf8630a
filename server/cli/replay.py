"""`bashrpc replay FILE... [--update] [-- SERVER_ARGS...]`: verify transcripts.

Each transcript runs against a fresh server in a fresh temporary workspace,
HOME and artifacts directory. Exit 0 when every one matches, 1 when one
differs (the difference is printed, naming the request and the field), 2 for
a usage error. `--update` writes what this run received in place of what
the transcript expected.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from bashrpc.protocol import messages
from bashrpc.protocol.transcript import Transcript, TranscriptError, dumps, loads
from bashrpc.server.cli.replayrun import DEFAULT_WAIT_SECONDS, Outcome, replay

EXIT_MATCH = 0
EXIT_DIFFERS = 1
EXIT_USAGE = 2


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay transcripts against a fresh server and compare what it says",
        description=messages.REPLAY_DESCRIPTION,
        usage=messages.REPLAY_USAGE,
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="transcripts")
    parser.add_argument(
        "--update", action="store_true", help="rewrite each transcript's expected side"
    )
    parser.add_argument(
        "--fixture",
        type=Path,
        default=None,
        metavar="DIR",
        help="copy this directory in as the workspace (default: the header's, else empty)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"the longest wait for the server before going on (default {DEFAULT_WAIT_SECONDS:g})",
    )


def load(path: Path) -> Transcript:
    """A transcript file, or TranscriptError saying why not."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: {exc.strerror}") from None
    try:
        transcript = loads(data)
    except TranscriptError as exc:
        raise TranscriptError(f"{path}: {exc}") from None
    for rule in transcript.header.rules:
        try:
            re.compile(rule.pattern)
        except re.error as exc:
            reason = messages.REPLAY_BAD_RULE.format(pattern=rule.pattern, reason=exc)
            raise TranscriptError(f"{path}: {reason}") from None
    return transcript


def fixture_of(path: Path, transcript: Transcript, given: Path | None) -> Path | None:
    """The workspace to copy in: --fixture, else the header's, relative to the file."""
    fixture = given
    if fixture is None and transcript.header.fixture is not None:
        fixture = path.parent / transcript.header.fixture
    if fixture is not None and not fixture.is_dir():
        raise TranscriptError(messages.REPLAY_NO_FIXTURE.format(path=fixture))
    return fixture


def report(path: Path, outcome: Outcome) -> str:
    if not outcome.differences:
        return messages.REPLAY_MATCHED.format(path=path)
    lines = [messages.REPLAY_DIFFERS.format(path=path)]
    lines += [f"  {line}" for line in outcome.differences]
    if outcome.log_tail:
        lines.append(messages.REPLAY_LOG_TAIL)
        lines += [f"  | {line}" for line in outcome.log_tail]
    return "\n".join(lines)


def run_replay(args: argparse.Namespace, server_args: list[str] | None) -> int:
    try:
        loaded = [(path, load(path)) for path in args.files]
        fixtures = [fixture_of(path, t, args.fixture) for path, t in loaded]
    except TranscriptError as exc:
        print(messages.CLI_ERROR.format(message=exc), file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_MATCH
    for (path, transcript), fixture in zip(loaded, fixtures, strict=True):
        outcome = replay(transcript, server_args, fixture, args.wait)
        if args.update:
            path.write_bytes(dumps(outcome.actual))
            print(messages.REPLAY_UPDATED.format(path=path))
            continue
        print(report(path, outcome), flush=True)
        if outcome.differences:
            status = EXIT_DIFFERS
    return status
