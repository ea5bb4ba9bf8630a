"""Which values a runtime's output never shows, and the compiled tables for them.

Secrets come from four places: the server's environment and any `env` a
session or a command is given (the variables whose names match the settings'
globs), values a host registers (`secrets/add`, for the whole runtime or one
session), and `env` entries a request marks secret (`secretEnv`). A table is
compiled once per distinct set of values and reused by every stream that has
that set, so a command costs a dictionary look-up, not a compile.
"""

from __future__ import annotations

import fnmatch
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from bashrpc.protocol import messages
from bashrpc.server.output.redact import SecretTable, TableSource
from bashrpc.server.output.secretforms import (
    DEFAULT_FORMATS,
    MIN_SECRET_BYTES,
    TokenFormat,
    check_secret,
    host_format,
)

DEFAULT_ENV_GLOBS = ("*_TOKEN", "*_KEY", "*_SECRET", "*PASSWORD*", "*_CREDENTIALS", "AWS_*")
# Tables kept compiled: one per distinct set of secrets (a session's, mostly).
_KEPT_TABLES = 64

Named = tuple[int, tuple[tuple[str, bytes], ...]]
# Variable names whose glob decision is remembered.
_KEPT_NAMES = 4096


class SecretBook:
    def __init__(
        self,
        env_globs: Sequence[str] = DEFAULT_ENV_GLOBS,
        patterns: bool = True,
        host_patterns: Sequence[str] = (),
        server_env: Mapping[str, str] | None = None,
    ) -> None:
        self._globs = re.compile("|".join(fnmatch.translate(glob) for glob in env_globs) or "(?!)")
        self._formats: tuple[TokenFormat, ...] = (
            *(DEFAULT_FORMATS if patterns else ()),
            *(host_format(index, pattern) for index, pattern in enumerate(host_patterns)),
        )
        self._names: dict[str, bool] = {}
        self._server = self.from_env(server_env or {})
        # Bumped by every `add`: a table compiled before is for other secrets (a plain
        # attribute: every read of every stream looks at it).
        self.generation = 0
        self._registered: dict[str, bytes] = {}
        self._sessions: dict[str, dict[str, bytes]] = {}
        self._tables: OrderedDict[Named, SecretTable] = OrderedDict()
        # Each session's environment's secrets, with the mapping they were found in.
        self._session_envs: dict[str, tuple[Mapping[str, str], dict[str, bytes]]] = {}

    def from_env(self, env: Mapping[str, str], marked: Iterable[str] = ()) -> dict[str, bytes]:
        """The secrets of an environment: variables the globs name (values too short
        to redact are left alone), and those `marked` (refused when too short)."""
        found: dict[str, bytes] = {}
        names = self._names
        for name, value in env.items():
            if names.get(name, False) or (name not in names and self._secret_name(name)):
                raw = value.encode("utf-8", "surrogateescape")
                if len(raw) >= MIN_SECRET_BYTES:
                    found[name] = raw
        for name in marked:
            if name not in env:
                raise ValueError(messages.SECRET_ENV_MISSING.format(name=name))
            raw = env[name].encode("utf-8", "surrogateescape")
            check_secret(name, raw)
            found[name] = raw
        return found

    def of_session(self, session_id: str, env: Mapping[str, str]) -> dict[str, bytes]:
        """`from_env` of a session's environment, found once: a session keeps the
        mapping it was opened with, and every command of it asks (a scan of the
        whole environment per command was a tenth of a short command's work)."""
        kept = self._session_envs.get(session_id)
        if kept is not None and kept[0] is env:
            return kept[1]
        found = self.from_env(env)
        if len(self._session_envs) >= _KEPT_TABLES:
            del self._session_envs[next(iter(self._session_envs))]
        self._session_envs[session_id] = (env, found)
        return found

    def _secret_name(self, name: str) -> bool:
        """Whether the globs name `name`: remembered, since every command asks."""
        known = self._names.get(name)
        if known is None:
            known = self._globs.fullmatch(name) is not None
            if len(self._names) < _KEPT_NAMES:
                self._names[name] = known
        return known

    @staticmethod
    def check(name: str, value: bytes) -> None:
        """Raises ValueError (a message for the host) for a value `add` would refuse."""
        check_secret(name, value)

    def add(self, name: str, value: bytes, session_id: str | None = None) -> None:
        """Register a value: for every later stream of the runtime, or of one session.
        Raises ValueError (a message for the host) when it is too short to redact."""
        check_secret(name, value)
        book = self._registered if session_id is None else self._sessions.setdefault(session_id, {})
        book[name] = value
        self.generation += 1

    def live(self, session_id: str | None, *envs: Mapping[str, bytes]) -> TableSource:
        """The table for a stream of the session, following later `add`s."""
        return LiveTable(self, session_id, envs)

    def forget_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._session_envs.pop(session_id, None)

    def table(self, session_id: str | None = None, *envs: Mapping[str, bytes]) -> SecretTable:
        """The compiled table for the runtime's secrets, the session's and `envs`'."""
        extra: dict[str, bytes] = {}
        if session_id is not None:
            extra.update(self._sessions.get(session_id, {}))
        for env in envs:
            extra.update(env)
        # The runtime's own secrets change only with `add`: its generation stands for them.
        key = (self.generation, tuple(sorted(extra.items())))
        table = self._tables.get(key)
        if table is None:
            named = {**self._server, **self._registered, **extra}
            table = SecretTable(sorted(named.items()), self._formats)
            self._tables[key] = table
            if len(self._tables) > _KEPT_TABLES:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return table


class LiveTable:
    """A stream's table that follows the book: a value registered while the stream
    runs (`SecretBook.add`) is redacted from its next read on."""

    def __init__(
        self, book: SecretBook, session_id: str | None, envs: tuple[Mapping[str, bytes], ...]
    ) -> None:
        self._book = book
        self._session_id = session_id
        self._envs = envs
        self._generation = book.generation
        self._table = book.table(session_id, *envs)

    def current(self) -> SecretTable:
        if self._generation != self._book.generation:
            self._generation = self._book.generation
            self._table = self._book.table(self._session_id, *self._envs)
        return self._table
