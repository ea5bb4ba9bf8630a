"""The bash tool's arguments, decoded as models and form-based clients send them.

Checked strictly (unknown arguments, wrong types) but for two leniencies of
clients whose forms send text: a numeric string counts as a number (`"30"`,
`"2.5"`), and null as an argument left out (the result says so of `timeout`).
What is not finite (`"nan"`, `"inf"`) is refused. Pure.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import msgspec

from bashrpc.protocol import invalidparams, messages
from bashrpc.protocol.mcp import BASH_TOOL, BashToolArguments, ToolsCallParams
from bashrpc.server import errors

T = TypeVar("T")


class Sent(msgspec.Struct, frozen=True):
    arguments: BashToolArguments
    # The arguments sent as null (taken as left out, which the result says).
    nulls: frozenset[str] = frozenset()


def arguments(params: ToolsCallParams) -> Sent:
    """The bash tool's arguments; an unknown tool or a bad argument is invalid params."""
    if params.name != BASH_TOOL:
        raise errors.InvalidArgument(messages.UNKNOWN_TOOL.format(name=params.name))
    args, nulls = _decoded(params, BashToolArguments)
    if isinstance(args.timeout, float) and not math.isfinite(args.timeout):
        error = messages.NOT_FINITE.format(field="timeout")
        message = messages.invalid_params(invalidparams.reason(error, params.arguments))
        raise errors.InvalidToolArguments(f"arguments: {error}", message)
    return Sent(args, nulls)


def asks_background(params: ToolsCallParams) -> bool:
    """The call is of `bash` and asks for `run_in_background`; bad arguments are
    not, and are refused when the call runs."""
    if params.name != BASH_TOOL:
        return False
    try:
        sent = msgspec.json.decode(params.arguments)
    except msgspec.DecodeError:
        return False
    return isinstance(sent, dict) and sent.get("run_in_background") is True


def decoded(params: ToolsCallParams, kind: type[T]) -> T:
    """A tool's arguments as `kind`, leniently (see the module); bad ones are invalid params."""
    return _decoded(params, kind)[0]


# Decoders of arguments as sent with no null, by type: one pass, no dict between.
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def _decoded(params: ToolsCallParams, kind: type[T]) -> tuple[T, frozenset[str]]:
    """The arguments as `kind`, and the names of those sent as null."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind, strict=False)
    try:
        return decoder.decode(params.arguments), frozenset()
    except msgspec.DecodeError:
        # A null, or an error: the way below drops the one and words the other.
        pass
    nulls: frozenset[str] = frozenset()
    try:
        sent = msgspec.json.decode(params.arguments)
        if isinstance(sent, dict):
            nulls = frozenset(name for name, value in sent.items() if value is None)
            sent = {name: value for name, value in sent.items() if value is not None}
        return msgspec.convert(sent, kind, strict=False), nulls
    except msgspec.DecodeError as exc:
        # The message names the argument as the model passed it: `timeout`, not a path.
        message = messages.invalid_params(invalidparams.reason(str(exc), params.arguments))
        raise errors.InvalidToolArguments(f"arguments: {exc}", message) from None


def given(value: T | msgspec.UnsetType) -> T | None:
    """An optional argument's value; None when it was left out."""
    return None if isinstance(value, msgspec.UnsetType) else value
