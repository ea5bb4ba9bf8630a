"""The sealed `requestState` of an `input_required` result: signed under the
process's key, bound to its tenant and its call, taken once, expiring."""

from __future__ import annotations

import secrets

import pytest

from bashrpc.protocol import messages
from bashrpc.server import errors
from bashrpc.server.services.tool import requeststate
from bashrpc.server.services.tool.requeststate import STATE_SECONDS, Sealer, call_digest

KEY = b"k" * 32
CALL = call_digest("bash", b'{"command": "npm init", "timeout": 60}')
SINCE = "2026-07-28T10:00:00.000000Z"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _refusal(sealer: Sealer, token: str, tenant: str | None = "ada", call: str = CALL) -> str:
    with pytest.raises(errors.InvalidArgument) as refused:
        sealer.open(token, tenant, call)
    return str(refused.value.detail)


def test_a_state_opens_once_for_its_tenant_and_call() -> None:
    sealer = Sealer(KEY, Clock())
    token = sealer.seal("ada", CALL, "term-3", SINCE)
    state = sealer.open(token, "ada", CALL)
    assert (state.job, state.asked) == ("term-3", SINCE)
    assert _refusal(sealer, token) == messages.REQUEST_STATE_REPLAYED


def test_the_call_is_known_whatever_the_order_of_its_arguments() -> None:
    again = call_digest("bash", b'{"timeout":60,"command":"npm init"}')
    assert again == CALL
    assert call_digest("bash", b'{"command": "npm init"}') != CALL
    assert call_digest("bash_input", b'{"command": "npm init", "timeout": 60}') != CALL


def test_another_tenant_or_call_is_refused_and_takes_nothing() -> None:
    sealer = Sealer(KEY, Clock())
    token = sealer.seal("ada", CALL, "term-1", SINCE)
    assert _refusal(sealer, token, tenant="eve") == messages.REQUEST_STATE_OTHER_TENANT
    assert _refusal(sealer, token, tenant=None) == messages.REQUEST_STATE_OTHER_TENANT
    other = call_digest("bash", b'{"command": "rm -rf /"}')
    assert _refusal(sealer, token, call=other) == messages.REQUEST_STATE_OTHER_CALL
    assert sealer.open(token, "ada", CALL).job == "term-1"


def test_a_tenant_named_in_any_script_is_known() -> None:
    """A clientId may be any text; the comparison in constant time takes it."""
    sealer = Sealer(KEY, Clock())
    token = sealer.seal("Zoë-café", CALL, "term-2", SINCE)
    assert _refusal(sealer, token, tenant="Zoe-cafe") == messages.REQUEST_STATE_OTHER_TENANT
    assert sealer.open(token, "Zoë-café", CALL).job == "term-2"


def test_an_expired_state_is_refused() -> None:
    clock = Clock()
    sealer = Sealer(KEY, clock)
    token = sealer.seal(None, CALL, "term-1", SINCE)
    clock.now += STATE_SECONDS
    assert _refusal(sealer, token, tenant=None) == messages.REQUEST_STATE_EXPIRED


def test_another_key_or_an_edit_is_a_forgery() -> None:
    clock = Clock()
    theirs = Sealer(b"x" * 32, clock).seal("ada", CALL, "term-1", SINCE)
    sealer = Sealer(KEY, clock)
    assert _refusal(sealer, theirs) == messages.REQUEST_STATE_FORGED
    token = sealer.seal("ada", CALL, "term-1", SINCE)
    body, _, mac = token.partition(".")
    # Another job named in a body signed for term-1.
    edited = body.replace(body[5], "A" if body[5] != "A" else "B", 1)
    for forged in (f"{edited}.{mac}", body, f"{body}.", "..", "%%%.%%%", ""):
        assert _refusal(sealer, forged) == messages.REQUEST_STATE_FORGED, forged


def test_the_process_has_one_key_of_its_own() -> None:
    """The server (or the daemon, all its tenants) seals with one sealer; a server
    started again makes another key, and refuses the last one's states."""
    assert requeststate.sealer() is requeststate.sealer()
    token = requeststate.sealer().seal("ada", CALL, "term-1", SINCE)
    restarted = Sealer(secrets.token_bytes(requeststate.KEY_BYTES), Clock())
    assert _refusal(restarted, token) == messages.REQUEST_STATE_FORGED
