"""The bash tool's arguments, decoded as models and form-based clients send them.

Checked strictly (unknown arguments, wrong types) but for two leniencies of
clients whose forms send text: a numeric string counts as a number (`"30"`,
`"2.5"`), and null as an argument left out. What is not finite (`"nan"`,
`"inf"`) is refused. Pure.
"""

from __future__ import annotations

import math
from typing import TypeVar

import msgspec

from bashrpc.protocol import invalidparams, messages
from bashrpc.protocol.mcp import BASH_TOOL, BashToolArguments, ToolsCallParams
from bashrpc.server import errors

T = TypeVar("T")


def arguments(params: ToolsCallParams) -> BashToolArguments:
    """The call's arguments; an unknown tool or a bad argument is invalid params."""
    if params.name != BASH_TOOL:
        raise errors.InvalidArgument(messages.UNKNOWN_TOOL.format(name=params.name))
    try:
        sent = msgspec.json.decode(params.arguments)
        if isinstance(sent, dict):
            sent = {name: value for name, value in sent.items() if value is not None}
        args = msgspec.convert(sent, BashToolArguments, strict=False)
        if isinstance(args.timeout, float) and not math.isfinite(args.timeout):
            raise msgspec.ValidationError(messages.NOT_FINITE.format(field="timeout"))
    except msgspec.DecodeError as exc:
        # The message names the argument as the model passed it: `timeout`, not a path.
        message = messages.invalid_params(invalidparams.reason(str(exc), params.arguments))
        raise errors.InvalidArgument(f"arguments: {exc}", message) from None
    return args


def given(value: T | msgspec.UnsetType) -> T | None:
    """An optional argument's value; None when it was left out."""
    return None if isinstance(value, msgspec.UnsetType) else value
