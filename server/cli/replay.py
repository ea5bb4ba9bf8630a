"""`bashrpc replay FILE... [--update] [--trust] [-- SERVER_ARGS...]`: verify transcripts.

Each transcript runs against a fresh server in a fresh temporary workspace,
HOME and artifacts directory. Exit 0 when every one matches, 1 when one
differs (the difference is printed, naming the request and the field), 2 for
a usage error. `--update` writes what this run received in place of what
a differing transcript expected, for the requests that differ only, and
leaves a matching one as it is (a new run cuts its chunks elsewhere:
rewriting the rest would only make a noisy diff).

A transcript is code: its commands run here. So its header may choose only
server arguments that cannot loosen the sandbox (`--trust` lifts that), and
its fixture only a folder beside it (`bashrpc.server.cli.fixture`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.protocol.transcript import Transcript, TranscriptError, dumps, loads
from bashrpc.protocol.transcriptupdate import updated
from bashrpc.server.cli.fixture import FixtureError, inside, plan
from bashrpc.server.cli.replayrun import Outcome, replay
from bashrpc.server.cli.runroot import untrusted_arg

EXIT_MATCH = 0
EXIT_DIFFERS = 1
EXIT_USAGE = 2


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
    """The workspace to copy in: --fixture, else the header's, which must lie in
    the transcript's folder; checked to hold only what is copied."""
    fixture = given
    named = transcript.header.fixture
    if fixture is None and named is not None:
        fixture = inside(path.parent, named)
        if fixture is None:
            raise TranscriptError(messages.REPLAY_FIXTURE_OUTSIDE.format(path=named))
    if fixture is None:
        return None
    if not fixture.is_dir():
        raise TranscriptError(messages.REPLAY_NO_FIXTURE.format(path=fixture))
    try:
        plan(fixture)
    except FixtureError as exc:
        reason = messages.REPLAY_BAD_FIXTURE.format(path=fixture, reason=exc)
        raise TranscriptError(reason) from None
    return fixture


def check_trust(path: Path, transcript: Transcript, server_args: list[str] | None) -> None:
    """TranscriptError when the header's server arguments, used unless the
    caller gives its own, need a trust that was not given."""
    arg = untrusted_arg(transcript.header.server_args)
    if server_args is None and arg is not None:
        raise TranscriptError(messages.REPLAY_UNTRUSTED_ARGS.format(path=path, arg=arg))


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
        if not args.trust:
            for path, transcript in loaded:
                check_trust(path, transcript, server_args)
        fixtures = [fixture_of(path, t, args.fixture) for path, t in loaded]
    except TranscriptError as exc:
        return _usage_error(exc)
    status = EXIT_MATCH
    for (path, transcript), fixture in zip(loaded, fixtures, strict=True):
        try:
            outcome = replay(transcript, server_args, fixture, args.wait)
        except FixtureError as exc:
            return _usage_error(messages.REPLAY_BAD_FIXTURE.format(path=fixture, reason=exc))
        if args.update and outcome.differences:
            path.write_bytes(dumps(rewritten(transcript, outcome)))
            print(messages.REPLAY_UPDATED.format(path=path), flush=True)
            continue
        print(report(path, outcome), flush=True)
        if outcome.differences:
            status = EXIT_DIFFERS
    return status


def rewritten(transcript: Transcript, outcome: Outcome) -> Transcript:
    """What `--update` writes for a transcript that differed: only the requests
    that differ take this run's lines (`bashrpc.protocol.transcriptupdate`)."""
    records = updated(transcript.records, outcome.actual.records, transcript.header.rules)
    return Transcript(header=outcome.actual.header, records=records)


def _usage_error(reason: object) -> int:
    print(messages.CLI_ERROR.format(message=reason), file=sys.stderr)
    return EXIT_USAGE
