"""The golden transcripts of tests/transcripts/: every one replays, and together
they cover every method and notification of the protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashrpc.protocol import mcp, methods, terminals
from bashrpc.protocol.transcript import ClientRecord, Record, loads
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
        *terminals.METHODS,
        *methods.NOTIFICATIONS_FROM_CLIENT,
        *mcp.NOTIFICATIONS_FROM_CLIENT,
        *terminals.NOTIFICATIONS_FROM_CLIENT,
    }
    wanted_received = {
        *methods.NOTIFICATIONS_FROM_SERVER,
        *mcp.NOTIFICATIONS_FROM_SERVER,
        *terminals.NOTIFICATIONS_FROM_SERVER,
    }
    assert wanted_sent - sent == set()
    assert wanted_received - received == NOT_FROM_A_HOST_MESSAGE


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_golden_transcript_replays(path: Path) -> None:
    outcome = replay(loads(path.read_bytes()))
    assert outcome.differences == [], "\n".join(outcome.differences + outcome.log_tail)


def client_ids(outcome_records: list[Record]) -> list[tuple[str, object]]:
    """(who, id) in the order a run sent and received them."""
    order: list[tuple[str, object]] = []
    for record in outcome_records:
        message = record.message
        if isinstance(message, dict) and "id" in message:
            order.append(("sent" if isinstance(record, ClientRecord) else "got", message["id"]))
    return order


@pytest.mark.slow
def test_replay_keeps_the_causal_order() -> None:
    """Lockstep requests wait for the reply before them; pipelined ones do not."""
    lockstep = replay(loads((GOLDEN / "bash_state_carries_across_requests.jsonl").read_bytes()))
    assert client_ids(lockstep.actual.records) == [
        (who, n) for n in range(1, 5) for who in ("sent", "got")
    ]
    pipelined = replay(loads((GOLDEN / "sessions_pipelined.jsonl").read_bytes()))
    order = client_ids(pipelined.actual.records)
    assert order.index(("sent", 4)) < order.index(("got", 3))
