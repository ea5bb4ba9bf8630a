"""Background jobs on the wire: ACP's terminal methods, as ACP has them, and bashrpc's own.

`terminal/create`, `terminal/output`, `terminal/wait_for_exit`, `terminal/kill`
and `terminal/release` take and give what the Agent Client Protocol's
"Terminals" section (protocol version 1, `ACP_PROTOCOL_VERSION`) says, so an
editor can forward an agent's calls unchanged; `_meta` is accepted (every
params type takes it, `methods.Params`) and only its trace context is read.
What goes beyond ACP is optional fields (`afterOffset`, `ready`) and methods
under bashrpc's own names (`terminal/write`, `terminal/close_stdin`,
`terminal/list`, the `terminal/exited` notification). ACP's `$/cancel_request`
cancels any request in flight, as `$/cancelRequest` does.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import (
    EnvName,
    NeedsInput,
    Params,
    Result,
    SecretEnv,
    SessionId,
    described,
)

# The ACP protocol version whose terminal methods these are.
ACP_PROTOCOL_VERSION = 1
MAX_READY_SECONDS = 3600.0
DEFAULT_READY_SECONDS = 30.0
MAX_PORT = 65535

TerminalId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
# What a job waits for from its person now, in `terminal/output` and `terminal/list`.
JobWait = Annotated[
    NeedsInput | None,
    described(
        "bashrpc's: what it waits for from its person now (a command on a terminal"
        " gone on as a job, `onInput`), as `bash/needsInput` told; absent otherwise."
    ),
]
JobState = Literal["running", "killing", "exited", "released"]

_SESSION = "The session the terminal runs in: its workspace, environment and sandbox."
_TERMINAL = "The terminal, as `terminal/create` named it."


class EnvVariable(Params):
    name: Annotated[EnvName, described("The variable's name.")]
    value: Annotated[str, described("Its value.")]


class Readiness(Params):
    """bashrpc's: what `terminal/create` waits for before it answers."""

    log: Annotated[
        str | None, described("A regular expression (Python syntax) to find in the output.")
    ] = None
    port: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=MAX_PORT)] | None,
        described("A TCP port on 127.0.0.1 to accept a connection."),
    ] = None
    timeout: Annotated[
        float,
        msgspec.Meta(gt=0, le=MAX_READY_SECONDS),
        described("Seconds to wait at most; the job keeps running either way."),
    ] = DEFAULT_READY_SECONDS


class TerminalCreateParams(Params):
    session_id: Annotated[SessionId, described(_SESSION + " Created on first use.")]
    command: Annotated[
        str,
        described(
            "Shell text, run by the session's shell (`bash -c`): without `args` (absent or"
            " null), or with `[]` unless it is a bare program name (letters, digits and"
            " `_./+,:@%-` only). Otherwise the program to execute, found on PATH."
        ),
    ]
    args: Annotated[
        list[str] | None,
        described("The program's arguments, as given; `[]` runs a bare program name alone."),
    ] = None
    env: Annotated[
        list[EnvVariable] | None, described("Variables over the session's environment.")
    ] = None
    secret_env: SecretEnv = None
    redact: Annotated[
        bool,
        described(
            "bashrpc's: false keeps secrets in the output, where the server allows it"
            " ([secrets] hostMayOptOut)."
        ),
    ] = True
    cwd: Annotated[
        str | None, described("Where it runs: absolute, or relative to the session's directory.")
    ] = None
    output_byte_limit: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        described("Bytes of output `terminal/output` returns at most: its newest ones."),
    ] = None
    ready: Annotated[
        Readiness | None,
        described("bashrpc's: answer once a log line or a port says the job is ready."),
    ] = None


ReadyState = Literal["ready", "timeout", "exited"]


class ReadyOutcome(Result, omit_defaults=True):
    state: Annotated[
        ReadyState, described("ready; timeout (the job still runs); or exited before ready.")
    ]
    seconds: Annotated[float, described("How long the wait took.")]
    matched: Annotated[
        str | None, described("The text the `log` expression matched, when it did.")
    ] = None


class TerminalCreateResult(Result, omit_defaults=True):
    terminal_id: Annotated[str, described(_TERMINAL)]
    ready: Annotated[
        ReadyOutcome | None, described("What the readiness wait found; only when asked.")
    ] = None


class TerminalParams(Params):
    session_id: Annotated[SessionId, described(_SESSION)]
    terminal_id: Annotated[TerminalId, described(_TERMINAL)]


class TerminalOutputParams(TerminalParams):
    after_offset: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        described(
            "bashrpc's cursor: only output after this byte (a `nextOffset` given before);"
            " absent: ACP's answer, the newest output."
        ),
    ] = None


class TerminalExitStatus(Result):
    exit_code: Annotated[int | None, described("The exit code; null when a signal ended it.")]
    signal: Annotated[str | None, described("The signal that ended it (SIGKILL...), or null.")]


class OutputGap(Result, omit_defaults=True):
    """Output asked for that memory no longer holds: it is in the artifact."""

    from_offset: Annotated[int, described("The first byte asked for (`afterOffset`).")]
    to_offset: Annotated[int, described("The first byte still kept, where `output` starts.")]
    artifact_id: Annotated[
        int | None, described("The artifact holding the missed bytes (`artifact/read`).")
    ] = None


class TerminalOutputResult(Result, omit_defaults=True):
    output: Annotated[str, described("The output (stdout and stderr merged), sanitized.")]
    truncated: Annotated[
        bool, described("Output before `output` is not in it (a byte limit, or a cursor's gap).")
    ]
    next_offset: Annotated[int, described("bashrpc's: the cursor for the next `afterOffset`.")]
    exit_status: Annotated[
        TerminalExitStatus | None, described("Present once the job has exited.")
    ] = None
    gap: Annotated[
        OutputGap | None,
        described("bashrpc's: present when `afterOffset` is older than what memory keeps."),
    ] = None
    needs_input: JobWait = None


class TerminalWaitResult(Result):
    exit_code: Annotated[int | None, described("The exit code; null when a signal ended it.")]
    signal: Annotated[str | None, described("The signal that ended it, or null.")]


class TerminalEmptyResult(Result):
    """ACP's answer to `terminal/kill` and `terminal/release`: an empty object."""


class TerminalWriteParams(TerminalParams, kw_only=True):
    data: Annotated[str, described("Text to write to the job's stdin, as UTF-8.")]
    secret: Annotated[bool, described("`data` is a secret: kept out of transcripts and logs.")] = (
        False
    )


class TerminalWriteResult(Result):
    bytes_written: Annotated[int, described("Bytes written to its stdin.")]


class TerminalListParams(Params):
    session_id: Annotated[
        SessionId | None, described("Only this session's jobs; absent: every session's.")
    ] = None


class TerminalInfo(Result, omit_defaults=True):
    terminal_id: Annotated[str, described(_TERMINAL)]
    session_id: Annotated[str, described(_SESSION)]
    command: Annotated[str, described("What it runs, as given.")]
    state: Annotated[JobState, described("running, killing, or exited.")]
    pid: Annotated[int | None, described("Its process's pid while it runs.")]
    total_bytes: Annotated[int, described("Bytes of output so far.")]
    kept_from: Annotated[int, described("The oldest byte memory still keeps.")]
    stdin_open: Annotated[bool, described("Its stdin still takes `terminal/write`.")]
    exit_status: Annotated[TerminalExitStatus | None, described("Once it has exited.")] = None
    artifact_id: Annotated[int | None, described("The artifact holding all its output.")] = None
    needs_input: JobWait = None


class TerminalListResult(Result):
    terminals: Annotated[list[TerminalInfo], described("The jobs, oldest first.")]


class TerminalExited(Result):
    """Params of `terminal/exited`: a job ended (told once, to its owner's connection)."""

    session_id: Annotated[str, described(_SESSION)]
    terminal_id: Annotated[str, described(_TERMINAL)]
    exit_status: Annotated[TerminalExitStatus, described("How it ended.")]


class CancelAcpRequestParams(Params):
    """ACP's `$/cancel_request`: the request answers -32800 (a `terminal/wait_for_exit`
    stops waiting; its job runs on)."""

    request_id: Annotated[RequestId, described("The request to cancel.")]


METHODS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct] | None]] = {
    "terminal/create": (TerminalCreateParams, TerminalCreateResult),
    "terminal/output": (TerminalOutputParams, TerminalOutputResult),
    "terminal/wait_for_exit": (TerminalParams, TerminalWaitResult),
    "terminal/kill": (TerminalParams, TerminalEmptyResult),
    "terminal/release": (TerminalParams, TerminalEmptyResult),
    "terminal/write": (TerminalWriteParams, TerminalWriteResult),
    "terminal/close_stdin": (TerminalParams, TerminalEmptyResult),
    "terminal/list": (TerminalListParams, TerminalListResult),
}

NOTIFICATIONS_FROM_CLIENT: dict[str, type[msgspec.Struct]] = {
    "$/cancel_request": CancelAcpRequestParams,
}

NOTIFICATIONS_FROM_SERVER: dict[str, type[msgspec.Struct]] = {
    "terminal/exited": TerminalExited,
}
