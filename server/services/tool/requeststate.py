"""The `requestState` of an `input_required` tool result (MCP 2026-07-28): what the
server needs to go on with the call when the client sends it again, in the
client's hands, so it must be sealed.

A state names the job the waiting command went on as, and the wait it asks
about. It is signed with HMAC-SHA256 under a key of this process (made at
random, never written: a restarted server refuses the states of the last),
bound to the tenant (`Services.principal`: the clientId, else the connection's
own) and to the call (its tool and arguments), and expires.
Each is taken once: a replay is refused, as are a forged, an expired, another
tenant's and another call's, each with its reason. The signature is compared in
constant time. Pure but for the key's making and the clock, both given.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

import msgspec

from bashrpc.protocol import messages
from bashrpc.server import errors

# How long a user has to answer.
STATE_SECONDS = 15 * 60
KEY_BYTES = 32


class State(msgspec.Struct, frozen=True, array_like=True):
    """What a sealed state holds."""

    tenant: str
    # The call it answers: a digest of its tool and arguments.
    call: str
    job: str
    # The wait it asks about (when it was first seen, as `InputWait.since`): an
    # answer that comes once the job waits for another is not typed into it.
    asked: str
    nonce: str
    expires: float


def call_digest(tool: str, arguments: bytes) -> str:
    """The call a state is tied to: its tool and its arguments, keys sorted."""
    try:
        canonical = msgspec.json.encode(msgspec.json.decode(arguments), order="sorted")
    except msgspec.DecodeError:
        canonical = arguments
    return hashlib.sha256(tool.encode() + b"\0" + canonical).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sealer:
    """Seals states and opens each once."""

    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock
        # Nonces taken, until their states expire (a replay is refused meanwhile).
        self._taken: dict[str, float] = {}

    def seal(self, tenant: str | None, call: str, job: str, asked: str) -> str:
        nonce = _b64(secrets.token_bytes(16))
        state = State(tenant or "", call, job, asked, nonce, self._clock() + STATE_SECONDS)
        body = msgspec.json.encode(state)
        return f"{_b64(body)}.{_b64(self._mac(body))}"

    def open(self, token: str, tenant: str | None, call: str) -> State:
        """The state, taken; InvalidArgument saying why when it may not be."""
        body = self._verified(token)
        try:
            state = msgspec.json.decode(body, type=State)
        except msgspec.DecodeError:
            raise errors.InvalidArgument(messages.REQUEST_STATE_FORGED) from None
        now = self._clock()
        self._forget(now)
        if state.expires <= now:
            raise errors.InvalidArgument(messages.REQUEST_STATE_EXPIRED)
        if state.nonce in self._taken:
            raise errors.InvalidArgument(messages.REQUEST_STATE_REPLAYED)
        # As bytes: compare_digest takes no str beyond ASCII, and a clientId may be any.
        if not hmac.compare_digest(state.tenant.encode(), (tenant or "").encode()):
            raise errors.InvalidArgument(messages.REQUEST_STATE_OTHER_TENANT)
        if not hmac.compare_digest(state.call.encode(), call.encode()):
            raise errors.InvalidArgument(messages.REQUEST_STATE_OTHER_CALL)
        self._taken[state.nonce] = state.expires
        return state

    def _verified(self, token: str) -> bytes:
        """The signed body, when the signature is this key's."""
        body_text, dot, mac_text = token.partition(".")
        try:
            body, mac = _unb64(body_text), _unb64(mac_text)
        except (binascii.Error, ValueError):
            body, mac = b"", b""
        if not dot or not hmac.compare_digest(mac, self._mac(body)):
            raise errors.InvalidArgument(messages.REQUEST_STATE_FORGED)
        return body

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()

    def _forget(self, now: float) -> None:
        for nonce in [n for n, expires in self._taken.items() if expires <= now]:
            del self._taken[nonce]


_process: Sealer | None = None


def sealer() -> Sealer:
    """This process's sealer (one key for the server, or the daemon and all its
    tenants), made on first use."""
    global _process
    if _process is None:
        _process = Sealer(secrets.token_bytes(KEY_BYTES))
    return _process
