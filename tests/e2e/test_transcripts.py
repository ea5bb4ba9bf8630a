"""The golden transcripts of tests/transcripts/: every one replays, and together
they cover every method and notification of the protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashrpc.protocol import mcp, methods
from bashrpc.protocol.transcript import ClientRecord, loads
from bashrpc.server.cli.replayrun import replay

GOLDEN = Path(__file__).resolve().parents[1] / "transcripts"
FILES = sorted(GOLDEN.glob("*.jsonl"))
MIN_TRANSCRIPTS = 25
# Sent only on SIGTERM, which no message of a host's can cause.
NOT_FROM_A_HOST_MESSAGE = {"server/draining"}


def methods_in(path: Path, client: bool) -> set[str]:
    found = set()
    for record in loads(path.read_bytes()).records:
        if isinstance(record, ClientRecord) != client:
            continue
        members = record.message if isinstance(record.message, list) else [record.message]
        found |= {m["method"] for m in members if isinstance(m, dict) and "method" in m}
    return found


def test_the_golden_transcripts_cover_every_method_and_notification() -> None:
    assert len(FILES) >= MIN_TRANSCRIPTS
    sent = set().union(*(methods_in(path, client=True) for path in FILES))
    received = set().union(*(methods_in(path, client=False) for path in FILES))
    wanted_sent = {
        *methods.METHODS,
        *mcp.METHODS,
        *methods.NOTIFICATIONS_FROM_CLIENT,
        *mcp.NOTIFICATIONS_FROM_CLIENT,
    }
    wanted_received = {*methods.NOTIFICATIONS_FROM_SERVER, *mcp.NOTIFICATIONS_FROM_SERVER}
    assert wanted_sent - sent == set()
    assert wanted_received - received == NOT_FROM_A_HOST_MESSAGE


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_golden_transcript_replays(path: Path) -> None:
    outcome = replay(loads(path.read_bytes()))
    assert outcome.differences == [], "\n".join(outcome.differences + outcome.log_tail)
