"""The secrets a command's output is redacted of, as the surfaces' requests name them.

The runtime's `SecretBook` holds what the server knows (its environment, values
a host registered); here a request adds its own `env` and `secretEnv`, and a
value refused by the book (too short, a name that is no name) becomes the
host's invalid-argument error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from bashrpc.protocol import messages
from bashrpc.server import errors
from bashrpc.server.output.redact import Redactor, TableSource, redact_rows
from bashrpc.server.runtime.instance import Runtime
from bashrpc.server.runtime.run.ptylane import ScreenFilter
from bashrpc.server.runtime.sessions.session import Session
from bashrpc.server.settings import Settings


def table_for(
    runtime: Runtime, session: Session, env: Mapping[str, str], secret_env: Sequence[str]
) -> TableSource:
    """The runtime's secrets, the session's and those of the command's own `env`; it
    follows values registered while the command runs (`SecretBook.add`)."""
    book = runtime.secrets
    try:
        own = book.from_env(env, secret_env)
    except ValueError as error:
        raise errors.InvalidArgument(str(error)) from None
    return book.live(session.id, book.of_session(session.id, session.env), own)


def redactor(table: TableSource | None) -> Redactor | None:
    return None if table is None else Redactor(table)


def screen(table: TableSource) -> ScreenFilter:
    def rows(lines: list[str], cols: int) -> list[str]:
        return redact_rows(table.current(), lines, cols)

    return rows


def check_opt_out(settings: Settings, redact: bool) -> None:
    """`redact: false`, where the host's settings allow it; refused otherwise."""
    if not redact and not settings.secrets.host_may_opt_out:
        raise errors.InvalidArgument(messages.REDACT_OPT_OUT_REFUSED)


def add(runtime: Runtime, named: Iterable[tuple[str, str]], session_id: str | None) -> int:
    """Register values for every later stream (of one session, when named); all or
    none: one refused value refuses the request."""
    values = [(name, value.encode("utf-8", "surrogateescape")) for name, value in named]
    try:
        for name, value in values:
            runtime.secrets.check(name, value)
    except ValueError as error:
        raise errors.InvalidArgument(str(error)) from None
    for name, value in values:
        runtime.secrets.add(name, value, session_id)
    return len(values)


def add_env(
    runtime: Runtime, session_id: str, env: Mapping[str, str], names: Sequence[str]
) -> None:
    """A session's `secretEnv`: its values are its own secrets from now on."""
    try:
        marked = runtime.secrets.from_env({name: env[name] for name in names if name in env}, names)
    except ValueError as error:
        raise errors.InvalidArgument(str(error)) from None
    for name, value in marked.items():
        runtime.secrets.add(name, value, session_id)
