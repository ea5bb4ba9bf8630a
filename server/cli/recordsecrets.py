"""What a transcript must not hold: the secrets a host sent, learnt from its requests.

The server redacts its own output; a transcript also holds the host's side:
the values of `secrets/add`, the `env` entries a request marks `secretEnv` or
whose names the default globs match, and the recording process's own secret
variables (the server's environment). Each line is written redacted of all of
them and of the token formats (a replay then sends the marker in their place).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from bashrpc.server.output.redact import Redactor
from bashrpc.server.output.secretbook import SecretBook

# The methods whose params carry an `env` (a map, or terminal/create's list).
_ENV_METHODS = ("bash", "session/open", "terminal/create")


class TranscriptSecrets:
    def __init__(self, server_env: Mapping[str, str] = os.environ) -> None:
        self._book = SecretBook(server_env=server_env)

    def learn(self, message: Any) -> None:
        """A host's request: the secrets it names, kept for every later line."""
        if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
            return
        params = message["params"]
        method = message.get("method")
        if method == "secrets/add":
            for secret in params.get("secrets") or []:
                if isinstance(secret, dict) and isinstance(secret.get("value"), str):
                    self._remember(str(secret.get("name")), secret["value"])
        elif method in _ENV_METHODS:
            env = _env_of(params.get("env"))
            marked = params.get("secretEnv") or []
            for name, value in env.items():
                if name in marked:
                    self._remember(name, value)
            for name, found in self._book.from_env(env).items():
                self._book.add(name, found)

    def _remember(self, name: str, value: str) -> None:
        try:
            self._book.add(name, value.encode("utf-8", "surrogateescape"))
        except ValueError:
            pass  # the server refuses it too, and it stays as sent: nothing it hides

    def redact(self, line: bytes) -> bytes:
        redactor = Redactor(self._book.table())
        return redactor.feed(line) + redactor.finish()


def _env_of(env: Any) -> dict[str, str]:
    if isinstance(env, dict):
        return {str(k): v for k, v in env.items() if isinstance(v, str)}
    if isinstance(env, list):
        return {
            str(item.get("name")): item["value"]
            for item in env
            if isinstance(item, dict) and isinstance(item.get("value"), str)
        }
    return {}
