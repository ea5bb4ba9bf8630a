"""Checks of a request's text fields that name the field they refuse.

Both command surfaces and `session/open` run these before anything
reaches bash, so a refusal points at `arguments.cwd` or `env.NAME`
rather than at a shell error.
"""

from __future__ import annotations

from collections.abc import Mapping

from bashrpc.protocol import messages
from bashrpc.server import errors
from bashrpc.server.runtime.run import execlimits

__all__ = ["env_fields", "reject_nul", "reject_unexecable"]


def reject_nul(fields: Mapping[str, str | None], field_prefix: str = "") -> None:
    """NUL cannot reach bash (it ends C strings), so a field holding one is
    refused up front, by its name in the request."""
    for name, value in fields.items():
        if value is not None and "\0" in value:
            field_name = f"{field_prefix}{name}"
            raise errors.InvalidArgument(messages.FIELD_HAS_NUL.format(field=field_name))


def env_fields(env: Mapping[str, str] | None) -> dict[str, str]:
    """An `env` object's values, by their names in the request."""
    return {f"env.{name}": value for name, value in (env or {}).items()}


def reject_unexecable(env: dict[str, str], given: dict[str, str], field_prefix: str = "") -> None:
    """An environment the kernel would refuse to exec is refused here, naming the limit."""
    refusal = execlimits.refusal(env, given, execlimits.current())
    if refusal is None:
        return
    if isinstance(refusal, execlimits.TooLong):
        field = f"{field_prefix}env.{refusal.name}"
        detail = messages.ENV_ENTRY_TOO_LONG.format(
            name=refusal.name, size=refusal.size, limit=refusal.limit, field=field
        )
    else:
        detail = messages.ENV_TOO_LARGE.format(
            size=refusal.size, limit=refusal.limit, room=refusal.room, field=f"{field_prefix}env"
        )
    raise errors.InvalidArgument(detail, message=detail)
