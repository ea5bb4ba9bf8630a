"""Params and results of every method, and the notifications the server sends.

Field names are snake_case in Python and camelCase on the wire. Params forbid
unknown fields so that a misspelt option fails loudly instead of being ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

RequestId = str | int

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
EnvName = Annotated[str, msgspec.Meta(pattern=ENV_NAME_PATTERN)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
# What a session's shell may touch; see the README's Sandbox section.
SandboxMode = Literal["off", "full", "workspace-write", "read-only"]
DEFAULT_SESSION_ID = "default"

MIN_TIMEOUT_SECONDS = 1.0
MAX_TIMEOUT_SECONDS = 3600.0

ARTIFACT_READ_DEFAULT_LIMIT = 64 * 1024
ARTIFACT_READ_MAX_LIMIT = 1024 * 1024


class Params(msgspec.Struct, forbid_unknown_fields=True, rename="camel", kw_only=True):
    """Base of all method params."""


class Result(msgspec.Struct, rename="camel", kw_only=True):
    """Base of all method results."""


# -- bash -------------------------------------------------------------------


class PtySize(Params):
    """A terminal size; each side is clamped, and a missing one takes the default."""

    cols: int | None = None
    rows: int | None = None


class BashParams(Params):
    command: str
    session_id: SessionId = DEFAULT_SESSION_ID
    cwd: str | None = None
    # Seconds; clamped to [MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS]. None: no deadline.
    timeout: float | None = None
    env: dict[EnvName, str] | None = None
    # Run on a pseudo-terminal (a one-shot `bash -c`): true, or a size.
    pty: bool | PtySize | None = None


class BashResult(Result, omit_defaults=True):
    output: str
    exit_code: int | None
    cancelled: bool
    timed_out: bool
    truncated: bool
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    # The shell's directory afterwards: UTF-8 text, U+FFFD for invalid bytes...
    working_dir: str | None
    # Present only when the full output was spilled to an artifact.
    artifact_id: int | None = None
    # True when the artifact stopped at a size limit (the tail is still whole).
    artifact_truncated: bool = False
    # ...and the exact bytes in base64, present only when the text is not exact.
    working_dir_base64: str | None = None
    # The command failed writing outside the sandbox's writable roots (the output says so).
    sandbox_denied: bool = False


class AbortBashParams(Params):
    session_id: SessionId | None = None
    request_id: RequestId | None = None


class AbortBashResult(Result):
    aborted: bool


# -- sessions ---------------------------------------------------------------


class SessionOpenParams(Params):
    session_id: SessionId | None = None
    cwd: str | None = None
    env: dict[EnvName, str] | None = None
    # Only as strict as the connection's mode, or stricter.
    sandbox: SandboxMode | None = None


class SessionOpenResult(Result, omit_defaults=True):
    session_id: str
    cwd: str
    # The exact bytes of `cwd` in base64, when they are not valid UTF-8.
    cwd_base64: str | None = None


class SessionCloseParams(Params):
    session_id: SessionId


class SessionCloseResult(Result):
    closed: bool


class SessionListParams(Params):
    pass


SessionState = Literal["idle", "busy"]


class SessionInfo(Result, omit_defaults=True):
    session_id: str
    state: SessionState
    # None until the session's shell has started (or after it died).
    pid: int | None
    cwd: str
    # Processes the idle shell started that still run (0 while busy).
    background_jobs: int
    # The exact bytes of `cwd` in base64, when they are not valid UTF-8.
    cwd_base64: str | None = None


class SessionListResult(Result):
    sessions: list[SessionInfo]


# -- artifacts --------------------------------------------------------------


class ArtifactReadParams(Params):
    id: Annotated[int, msgspec.Meta(ge=0)]
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=ARTIFACT_READ_MAX_LIMIT)] = (
        ARTIFACT_READ_DEFAULT_LIMIT
    )


class ArtifactReadResult(Result):
    id: int
    text: str
    offset: int
    # None once the read reached the end of the artifact.
    next_offset: int | None
    total_bytes: int


# -- PTY control --------------------------------------------------------------


class PtyInputParams(Params):
    request_id: RequestId
    # Written as-is (UTF-8), before `keys`.
    data: str | None = None
    # Named keys: enter, tab, up, ctrl+c, alt+x, f5...
    keys: list[str] | None = None


class PtyInputResult(Result):
    bytes_written: int


class PtyResizeParams(Params):
    request_id: RequestId
    cols: int
    rows: int


class PtyResizeResult(Result):
    cols: int
    rows: int


class PtyScreenParams(Params):
    request_id: RequestId


class Cursor(Result):
    x: int
    y: int


class PtyScreen(Result):
    cols: int
    rows: int
    lines: list[str]
    cursor: Cursor


# -- lifecycle --------------------------------------------------------------


class ShutdownParams(Params):
    pass


class ExitParams(Params):
    pass


# -- notifications ----------------------------------------------------------


class PtyOutput(Result):
    """Params of ``pty/output``: raw terminal bytes, base64, escape sequences intact."""

    request_id: RequestId | None
    data: str


class BashChunk(Result, omit_defaults=True):
    """Params of the ``bash/chunk`` notification: sanitized output, in order."""

    # Null only when the request itself had a null id.
    request_id: RequestId | None
    session_id: str
    seq: int
    text: str
    # Bytes of output skipped just before this text (a notice in `text` says so
    # too): the client took nothing for a while. The artifact has them.
    skipped: int = 0


class ServerDraining(Result):
    """Params of ``server/draining``: the server got SIGTERM and takes no new
    commands; running ones have `seconds` to finish before they are aborted."""

    seconds: float


# Method name -> (params type, result type); the schema generator and the
# dispatcher both read this table, so they cannot drift apart.
METHODS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct] | None]] = {
    "bash": (BashParams, BashResult),
    "abort_bash": (AbortBashParams, AbortBashResult),
    "session/open": (SessionOpenParams, SessionOpenResult),
    "session/close": (SessionCloseParams, SessionCloseResult),
    "session/list": (SessionListParams, SessionListResult),
    "artifact/read": (ArtifactReadParams, ArtifactReadResult),
    "shutdown": (ShutdownParams, None),
    "pty/input": (PtyInputParams, PtyInputResult),
    "pty/resize": (PtyResizeParams, PtyResizeResult),
    "pty/screen": (PtyScreenParams, PtyScreen),
}

NOTIFICATIONS_FROM_CLIENT: dict[str, type[msgspec.Struct]] = {
    "exit": ExitParams,
}

NOTIFICATIONS_FROM_SERVER: dict[str, type[msgspec.Struct]] = {
    "bash/chunk": BashChunk,
    "pty/output": PtyOutput,
    "server/draining": ServerDraining,
}
