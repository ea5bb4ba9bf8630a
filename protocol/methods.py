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
# What a session's shell may touch; see docs/sandbox.md.
SandboxMode = Literal["off", "full", "workspace-write", "read-only"]
# What a sandboxed command may reach: loopback alone, an allowlist through the
# server's proxy, or the host's network; from the narrowest to the widest.
NetworkMode = Literal["off", "allowlist", "host"]
DEFAULT_SESSION_ID = "default"

MIN_TIMEOUT_SECONDS = 1.0
MAX_TIMEOUT_SECONDS = 3600.0

ARTIFACT_READ_DEFAULT_LIMIT = 64 * 1024
ARTIFACT_READ_MAX_LIMIT = 1024 * 1024
# No artifact id has more digits: a longer number names no artifact.
ARTIFACT_ID_MAX_DIGITS = 18


def described(text: str) -> msgspec.Meta:
    """A field's description in the generated schemas (every field has one)."""
    return msgspec.Meta(description=text)


def _used_as_text(value: object) -> str | None:
    return value if isinstance(value, str) else None


class CallMeta(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`_meta` of a request, as MCP has it: open metadata. Unknown keys, and values
    of a type the server cannot use, are accepted and ignored (never a -32602)."""

    traceparent: Annotated[
        object,
        described(
            "W3C trace context: with tracing on, the request's span is this one's child."
            " Used when a string; a value of another type is ignored."
        ),
    ] = None
    tracestate: Annotated[
        object,
        described("W3C trace state, passed on with it. Used when a string, else ignored."),
    ] = None

    @property
    def trace_parent(self) -> str | None:
        return _used_as_text(self.traceparent)

    @property
    def trace_state(self) -> str | None:
        return _used_as_text(self.tracestate)


class Params(
    msgspec.Struct, forbid_unknown_fields=True, rename="camel", kw_only=True, omit_defaults=True
):
    """Base of all method params. A client leaves out what it did not set, as a
    hand-written request would."""

    meta: Annotated[CallMeta | None, described("Request metadata (`_meta`), as in MCP.")] = (
        msgspec.field(default=None, name="_meta")
    )


class Result(msgspec.Struct, rename="camel", kw_only=True):
    """Base of all method results."""


_REQUEST_ID = "The id of the request that runs the command."
_SESSION_ID = "The session: its own shell, cwd and environment."
_CWD_BASE64 = "The exact bytes of `cwd` in base64; present only when they are not valid UTF-8."
_ENV = "Environment variables to set; names match ^[A-Za-z_][A-Za-z0-9_]*$."
_COLS = "Terminal columns."
_ROWS = "Terminal rows."

# -- bash -------------------------------------------------------------------


# `secretEnv` wherever an `env` is given.
SecretEnv = Annotated[
    list[EnvName] | None,
    described(
        "Names of `env` entries whose values are secrets: never shown in output"
        " (at least 8 bytes each)."
    ),
]


class PtySize(Params):
    """A terminal size; each side is clamped, and a missing one takes the default."""

    cols: Annotated[int | None, described(_COLS + " Clamped to 20-400; default 120.")] = None
    rows: Annotated[int | None, described(_ROWS + " Clamped to 5-200; default 40.")] = None


class BashParams(Params):
    command: Annotated[str, described("The command, run as given in the session's shell.")]
    session_id: Annotated[SessionId, described(_SESSION_ID + " Created on first use.")] = (
        DEFAULT_SESSION_ID
    )
    cwd: Annotated[
        str | None,
        described("Directory to run in, relative to the session's cwd; the shell stays there."),
    ] = None
    # Seconds; clamped to [MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS]. None: no deadline.
    timeout: Annotated[
        float | None, described("Seconds before the command is stopped, clamped to 1-3600.")
    ] = None
    env: Annotated[dict[EnvName, str] | None, described(_ENV + " For this command only.")] = None
    pty: Annotated[
        bool | PtySize | None,
        described("Run on a pseudo-terminal, as a one-shot `bash -c`: true, or a size."),
    ] = None
    one_shot: Annotated[
        bool,
        described(
            "Run at once on a shell of its own, without the session's state, rather than"
            " waiting for the session's earlier commands."
        ),
    ] = False
    background: Annotated[
        bool,
        described(
            "Start it as a background job (`terminal/*`) in a shell with the session's"
            " cwd and environment, and answer at once with its `terminalId`."
        ),
    ] = False
    background_after: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT_SECONDS)] | None,
        described(
            "Run it as a background job; answer when it ends, or after this many seconds"
            " with its output so far and its `terminalId`, the job running on."
        ),
    ] = None
    secret_env: SecretEnv = None
    redact: Annotated[
        bool,
        described(
            "false: output with its secrets as they are, where the server allows it"
            " ([secrets] hostMayOptOut)."
        ),
    ] = True
    on_input: Annotated[
        Literal["wait", "return"],
        described(
            "When the command waits for its person (on a PTY, `bash/needsInput`):"
            " `wait` (the default) runs on until it ends, the host answering with"
            " `pty/input`; `return` answers at once with the output so far and the"
            " wait (`needsInput`), the command going on as the background job"
            " `terminalId`."
        ),
    ] = "wait"


class BashResult(Result, omit_defaults=True):
    output: Annotated[
        str, described("The sanitized output, stdout and stderr merged; its tail when truncated.")
    ]
    exit_code: Annotated[
        int | None,
        described("The command's exit status; null when there is none (aborted, timed out)."),
    ]
    cancelled: Annotated[bool, described("The command was aborted, or timed out.")]
    timed_out: Annotated[bool, described("The command was stopped at its timeout.")]
    truncated: Annotated[bool, described("`output` holds only the tail of the output.")]
    total_lines: Annotated[int, described("Lines of the whole output.")]
    total_bytes: Annotated[int, described("Bytes of the whole output.")]
    output_lines: Annotated[int, described("Lines in `output`.")]
    output_bytes: Annotated[int, described("Bytes in `output`.")]
    working_dir: Annotated[
        str | None,
        described("The shell's directory afterwards, as UTF-8 text (U+FFFD for invalid bytes)."),
    ]
    artifact_id: Annotated[
        int | None, described("The artifact holding the whole output; present only when truncated.")
    ] = None
    artifact_truncated: Annotated[bool, described("The artifact stopped at a size limit.")] = False
    working_dir_base64: Annotated[
        str | None,
        described("The exact bytes of `workingDir` in base64; present only when not exact."),
    ] = None
    sandbox_denied: Annotated[
        bool,
        described(
            "The sandbox refused the command: a write outside its writable roots (the"
            " command failed on it), or a host its network allowlist does not allow;"
            " the output's last lines name them."
        ),
    ] = False
    shell_restarted: Annotated[
        bool,
        described(
            "The session's shell state (variables, functions, exports) was lost: this "
            "command's shell ended, or the one before it did since the last result."
        ),
    ] = False
    queued_seconds: Annotated[
        float | None,
        described(
            "Seconds the command waited behind the session's earlier commands;"
            " absent when it waited for none."
        ),
    ] = None
    one_shot: Annotated[
        bool,
        described("The command ran on a one-shot shell (`oneShot`), without the session's state."),
    ] = False
    tool_text: Annotated[
        str | None,
        described(
            "For a `tools/call` resumed with `bash/attach`: its tool result's text, as the"
            " model would have got it."
        ),
    ] = None
    terminal_id: Annotated[
        str | None,
        described(
            "The background job the command runs on as (`background`, `backgroundAfter`,"
            " `onInput`)."
        ),
    ] = None
    redactions: Annotated[
        dict[str, int] | None,
        described("Secrets replaced with `[REDACTED:NAME]` in the output, counted by name."),
    ] = None
    needs_input: Annotated[
        NeedsInput | None,
        described(
            'With `onInput: "return"`: the command waits for its person and runs on as'
            " the job `terminalId` (answer it with `terminal/write` or `pty/input`, stop"
            " it with `terminal/kill`); what it asks, as `bash/needsInput` told."
        ),
    ] = None


class AbortBashParams(Params):
    session_id: Annotated[
        SessionId | None, described("Abort this session's commands (default: the default one).")
    ] = None
    request_id: Annotated[RequestId | None, described("Abort the request with this id.")] = None


class AbortBashResult(Result):
    aborted: Annotated[bool, described("Something was running and is aborted.")]


# -- sessions ---------------------------------------------------------------


class SessionOpenParams(Params):
    session_id: Annotated[SessionId | None, described(_SESSION_ID + " Generated when absent.")] = (
        None
    )
    cwd: Annotated[
        str | None, described("The shell's starting directory, relative to the workspace.")
    ] = None
    env: Annotated[dict[EnvName, str] | None, described(_ENV + " For the session's shell.")] = None
    secret_env: SecretEnv = None
    sandbox: Annotated[
        SandboxMode | None,
        described("The session's sandbox mode: only as strict as the connection's, or stricter."),
    ] = None
    network: Annotated[
        NetworkRequest | None,
        described("A new session's network, narrower than the server's; absent: the server's."),
    ] = None


class NetworkRequest(Params):
    """A session's own network, no wider than the server's (`[sandbox.network]`)."""

    mode: Annotated[NetworkMode, described("off < allowlist < host; at most the server's mode.")]
    allow: Annotated[
        list[str] | None,
        described(
            "Hosts (exact, or `*.` for subdomains only) and IP literals, each within the"
            " server's allowlist; absent: the server's."
        ),
    ] = None
    deny: Annotated[list[str] | None, described("Added to the server's deny list.")] = None
    ports: Annotated[
        list[Annotated[int, msgspec.Meta(ge=1, le=65535)]] | None,
        described("Ports, among the server's; absent: the server's."),
    ] = None


class NetworkPolicy(Result, omit_defaults=True):
    """What a session's commands may reach over the network."""

    mode: Annotated[
        NetworkMode,
        described(
            "off: loopback alone; allowlist: the hosts below, through the server's proxy;"
            " host: the host's network (also whenever the sandbox mode is off or full)."
        ),
    ]
    allow: Annotated[list[str] | None, described("Allowed hosts (allowlist).")] = None
    deny: Annotated[list[str] | None, described("Refused hosts; deny wins (allowlist).")] = None
    ports: Annotated[list[int] | None, described("Allowed ports (allowlist).")] = None


class NetworkConnection(Result, omit_defaults=True):
    """One connection a sandboxed command made through the allowlist's proxy."""

    host: Annotated[str, described("The host asked for (empty when none could be read).")]
    port: Annotated[int, described("The port asked for.")]
    allowed: Annotated[bool, described("Whether it went out.")]
    reason: Annotated[
        str,
        described(
            "allowed, denied, not-allowed, port, address, invalid, unresolved,"
            " unreachable, sni, smuggled or malformed."
        ),
    ]
    protocol: Annotated[str, described("http, connect or socks.")]
    bytes_sent: Annotated[int, described("From the command to the host.")]
    bytes_received: Annotated[int, described("From the host to the command.")]
    seconds: Annotated[float, described("How long the connection lasted.")]
    started: Annotated[float, described("When it started, in seconds since the epoch.")]
    rule: Annotated[
        str | None, described("The entry (or address, or server name) that decided.")
    ] = None
    open: Annotated[
        bool,
        described("Still open: its bytes and seconds are those so far. Listed after those ended."),
    ] = False


class SecretValue(Params):
    name: Annotated[
        str, described("What it is redacted as, `[REDACTED:NAME]`: letters, digits, `_-.`.")
    ]
    value: Annotated[str, described("The secret: at least 8 bytes.")]


class SecretsAddParams(Params):
    secrets: Annotated[list[SecretValue], described("Values never shown in output from now on.")]
    session_id: Annotated[
        SessionId | None,
        described(_SESSION_ID + " Only for this session's output; absent: every session's."),
    ] = None


class SecretsAddResult(Result):
    added: Annotated[int, described("How many values were registered.")]


class SessionOpenResult(Result, omit_defaults=True):
    session_id: Annotated[str, described(_SESSION_ID)]
    cwd: Annotated[str, described("The session's directory, as UTF-8 text.")]
    cwd_base64: Annotated[str | None, described(_CWD_BASE64)] = None


class SessionCloseParams(Params):
    session_id: Annotated[SessionId, described("The session to close.")]


class SessionCloseResult(Result):
    closed: Annotated[bool, described("The session existed and is closed.")]


class SessionListParams(Params):
    pass


SessionState = Literal["idle", "busy"]
RequestState = Literal["queued", "running", "finished"]


class RequestInfo(Result):
    request_id: Annotated[RequestId, described("The request's id, as its client gave it.")]
    method: Annotated[str, described("The request's method.")]
    seq: Annotated[
        int, described("`bash/chunk`s (`pty/output`s on a PTY) sent so far: the next one's seq.")
    ]
    state: Annotated[
        RequestState,
        described(
            "queued (waiting for its session's turn), running, or finished with its"
            " result kept for a `bash/attach`."
        ),
    ]
    pty: Annotated[
        bool, described("It runs on a PTY: its output comes as `pty/output`, not `bash/chunk`.")
    ] = False


class SessionInfo(Result, omit_defaults=True):
    session_id: Annotated[str, described(_SESSION_ID)]
    state: Annotated[SessionState, described("Whether a command is running.")]
    pid: Annotated[
        int | None, described("The shell's pid; null until it has started, or after it died.")
    ]
    cwd: Annotated[str, described("The session's directory, as UTF-8 text.")]
    background_jobs: Annotated[
        int, described("Processes the idle shell started that still run (0 while busy).")
    ]
    cwd_base64: Annotated[str | None, described(_CWD_BASE64)] = None
    requests: Annotated[
        list[RequestInfo] | None,
        described("Under the daemon, a clientId's requests that `bash/attach` can resume."),
    ] = None
    owner: Annotated[
        str | None,
        described(
            "Under the daemon: the clientId of the connection that opened the session;"
            " absent when it named none."
        ),
    ] = None
    queued: Annotated[
        list[RequestId] | None,
        described("The ids of the commands waiting for their turn, first in line first."),
    ] = None
    network: Annotated[
        NetworkPolicy | None, described("What the session's commands may reach.")
    ] = None
    connections: Annotated[
        list[NetworkConnection] | None,
        described(
            "With an allowlist: the session's last 100 connections, those that ended"
            " (oldest first), then those still open (`open`)."
        ),
    ] = None
    needs_input: Annotated[
        list[NeedsInput] | None,
        described(
            "Its PTY commands that wait for their person now, as `bash/needsInput` told"
            " them; absent when none does."
        ),
    ] = None


class SessionListResult(Result):
    sessions: Annotated[list[SessionInfo], described("Every session.")]


class BashAttachParams(Params):
    request_id: Annotated[
        RequestId, described("The `bash` or `tools/call` request to resume, by its id.")
    ]
    after_seq: Annotated[
        int,
        msgspec.Meta(ge=-1),
        described(
            "The last `bash/chunk` (`pty/output` on a PTY, the nth `notifications/progress`"
            " of a tool call) already received; -1 (default): from the start."
        ),
    ] = -1
    accept_gap: Annotated[
        bool,
        described(
            "Resume even if output after `afterSeq` is no longer kept: the first chunk"
            " then says how many were missed. False (default): such a resume is refused"
            " with -32009, naming the first seq kept."
        ),
    ] = False


# -- artifacts --------------------------------------------------------------


class ArtifactReadParams(Params):
    id: Annotated[int, msgspec.Meta(ge=0), described("The artifact's id, N in artifact://N.")]
    offset: Annotated[int, msgspec.Meta(ge=0), described("The first byte to read.")] = 0
    limit: Annotated[
        int,
        msgspec.Meta(ge=1, le=ARTIFACT_READ_MAX_LIMIT),
        described("Bytes to read at most; cuts fall on UTF-8 character boundaries."),
    ] = ARTIFACT_READ_DEFAULT_LIMIT


class ArtifactReadResult(Result, omit_defaults=True):
    id: Annotated[int, described("The artifact's id.")]
    text: Annotated[
        str, described("The bytes read, as text; bytes that are not UTF-8 show as U+FFFD.")
    ]
    offset: Annotated[int, described("Where the text starts, in bytes.")]
    next_offset: Annotated[
        int | None, described("Where the next read starts; null at the end of the artifact.")
    ]
    total_bytes: Annotated[int, described("The artifact's size in bytes.")]
    text_base64: Annotated[
        str | None,
        described("The exact bytes read in base64; present only when they are not valid UTF-8."),
    ] = None


# -- PTY control --------------------------------------------------------------


class PtyInputParams(Params):
    request_id: Annotated[RequestId, described(_REQUEST_ID)]
    data: Annotated[
        str | None, described("Text to type, written as-is (UTF-8), before `keys`.")
    ] = None
    keys: Annotated[
        list[str] | None, described("Named keys to press: enter, tab, up, ctrl+c, alt+x, f5...")
    ] = None
    secret: Annotated[
        bool,
        described(
            "`data` is a secret (a password, a passphrase): refused while the terminal"
            " echoes, and kept out of transcripts and logs."
        ),
    ] = False


class PtyInputResult(Result):
    bytes_written: Annotated[int, described("Bytes written to the terminal.")]


class PtyResizeParams(Params):
    request_id: Annotated[RequestId, described(_REQUEST_ID)]
    cols: Annotated[int, described(_COLS + " Clamped to 20-400.")]
    rows: Annotated[int, described(_ROWS + " Clamped to 5-200.")]


class PtyResizeResult(Result):
    cols: Annotated[int, described(_COLS + " As applied.")]
    rows: Annotated[int, described(_ROWS + " As applied.")]


class PtyScreenParams(Params):
    request_id: Annotated[RequestId, described(_REQUEST_ID)]


class Cursor(Result):
    x: Annotated[int, described("Column, from 0.")]
    y: Annotated[int, described("Row, from 0.")]


class PtyScreen(Result):
    cols: Annotated[int, described(_COLS)]
    rows: Annotated[int, described(_ROWS)]
    lines: Annotated[list[str], described("The rendered viewport, one string per row.")]
    cursor: Annotated[Cursor, described("Where the cursor is.")]


# -- lifecycle --------------------------------------------------------------


class ShutdownParams(Params):
    pass


class ExitParams(Params):
    pass


# -- notifications ----------------------------------------------------------


class PtyOutput(Result, omit_defaults=True):
    """Params of ``pty/output``: raw terminal bytes, base64, escape sequences intact."""

    request_id: Annotated[RequestId | None, described(_REQUEST_ID)]
    seq: Annotated[int, described("The notification's number for its request, from 0.")]
    data: Annotated[str, described("Raw terminal bytes, base64.")]
    # The client fell more than 1 MiB behind: the oldest bytes were dropped.
    skipped: Annotated[
        int,
        described(
            "Terminal bytes dropped just before `data`: the client fell more than 1 MiB"
            " behind. `pty/screen` shows the terminal as it is now."
        ),
    ] = 0


class NeedsInput(Result, omit_defaults=True):
    """Params of ``bash/needsInput``: a PTY command waits for its person, told once
    per wait, after its processes have sat blocked on their terminal for the settle
    time (``input.settleSeconds``). The command keeps running: answer with
    ``pty/input`` (``secret: true`` for a secret), or end it with ``abort_bash``.
    The same shape tells a job's wait in ``terminal/output`` and ``session/list``,
    and a returned ``bash``'s in its result (``onInput``)."""

    request_id: Annotated[RequestId | None, described(_REQUEST_ID)]
    session_id: Annotated[str, described(_SESSION_ID)]
    prompt: Annotated[str, described("The terminal's line at its cursor: what it asks.")]
    secret: Annotated[
        bool,
        described(
            "The terminal reads a line without echoing it: a password or a passphrase."
            " Only the user should answer it."
        ),
    ]
    since: Annotated[str, described("When the wait was first seen: ISO 8601, UTC.")]
    pid: Annotated[int | None, described("The process blocked on the terminal.")]
    program: Annotated[str | None, described("That process's name (its `comm`).")]
    terminal_id: Annotated[
        str | None,
        described(
            "The background job that waits (a job reading its stdin, or a command gone on"
            " as one); absent for a request's command."
        ),
    ] = None


class BashChunk(Result, omit_defaults=True):
    """Params of the ``bash/chunk`` notification: sanitized output, in order."""

    request_id: Annotated[
        RequestId | None, described(_REQUEST_ID + " Null only when that id was null.")
    ]
    session_id: Annotated[str, described(_SESSION_ID)]
    seq: Annotated[int, described("The chunk's number for its request, from 0.")]
    text: Annotated[
        str,
        described(
            "Sanitized output, in order; bytes that are not UTF-8 show as U+FFFD"
            " (`textBase64` has them exact)."
        ),
    ]
    text_base64: Annotated[
        str | None,
        described(
            "The exact bytes of `text` in base64; present only when they are not valid UTF-8."
        ),
    ] = None
    # The client took nothing for a while; a notice in `text` says so too.
    skipped: Annotated[
        int, described("Bytes of output skipped just before this text; the artifact has them.")
    ] = 0


class ServerDraining(Result):
    """Params of ``server/draining``: the server got SIGTERM and takes no new
    commands; running ones have `seconds` to finish before they are aborted."""

    seconds: Annotated[
        float, described("How long running commands may still finish before they are aborted.")
    ]


# -- fleet: figures and reset ----------------------------------------------


class ServerStatsParams(Params):
    pass


class CommandsFinished(Result):
    """Commands finished, by how they ended (each command counts once)."""

    ok: Annotated[int, described("Exited 0.")]
    failed: Annotated[int, described("Exited non-zero (and not denied by the sandbox).")]
    cancelled: Annotated[int, described("Aborted or cancelled by the client or the server.")]
    timed_out: Annotated[int, described("Killed at their timeout.")]
    sandbox_denied: Annotated[int, described("Failed on a write the sandbox refused.")]


class Kills(Result):
    """Commands killed, by why."""

    timeout: Annotated[int, described("At their timeout.")]
    cancel: Annotated[int, described("By an abort, a cancel, a cut or a shutdown.")]
    reset: Annotated[int, described("Processes ended by `session/reset`.")]


class Resumes(Result):
    ok: Annotated[int, described("`bash/attach`es that replayed all that was asked.")]
    gap: Annotated[
        int, described("`bash/attach`es that asked for output no longer kept (refused or told).")
    ]


class NetworkConnections(Result):
    """Connections sandboxed commands made through the allowlist's proxy, by decision."""

    allowed: Annotated[int, described("Let through to an allowed host.")]
    refused: Annotated[int, described("Refused (not allowed, denied, a bad request).")]


class NetworkBytes(Result):
    """Bytes through the allowlist's proxy, each way."""

    sent: Annotated[int, described("From sandboxed commands to the hosts they reached.")]
    received: Annotated[int, described("From those hosts back to the commands.")]


class DurationHistogram(Result):
    """Command durations, cumulative as Prometheus keeps them."""

    bounds: Annotated[list[float], described("Upper bounds of the buckets, in seconds.")]
    counts: Annotated[
        list[int], described("Commands that took at most each bound (one count per bound).")
    ]
    count: Annotated[int, described("Every command measured.")]
    sum: Annotated[float, described("Their seconds added up.")]


class ServerStatsResult(Result):
    """The process's figures: the same as the daemon's `/metrics`."""

    connections: Annotated[int, described("Connections being served now.")]
    tenants: Annotated[int, described("Tenants (a clientId's or a scope's sessions) alive now.")]
    sessions: Annotated[int, described("Sessions now.")]
    shells: Annotated[int, described("Persistent shells running now.")]
    commands_started: Annotated[int, described("Commands started since the server started.")]
    commands_running: Annotated[int, described("Commands running now.")]
    commands_queued: Annotated[
        int, described("Commands waiting for their session's turn now (queue depth).")
    ]
    jobs: Annotated[int, described("Background jobs (`terminal/*`) running now.")]
    commands_finished: Annotated[CommandsFinished, described("Commands finished, by outcome.")]
    command_seconds: Annotated[DurationHistogram, described("How long commands took.")]
    output_bytes: Annotated[int, described("Bytes commands printed (before any cut).")]
    kills: Annotated[Kills, described("Kills, by reason.")]
    resumes: Annotated[Resumes, described("`bash/attach` resumes, by result.")]
    replay_bytes: Annotated[
        int, described("Bytes held in replay rings for `bash/attach`, across all tenants.")
    ]
    rc_capture_failures: Annotated[
        int, described("Captures of the user's rc that failed or timed out.")
    ]
    log_lines_dropped: Annotated[
        int,
        described("Log lines (and console spans) dropped because stderr was not read fast enough."),
    ]
    network_connections: Annotated[
        NetworkConnections,
        described("Connections through the sandbox's network allowlist, by decision."),
    ] = msgspec.field(default_factory=lambda: NetworkConnections(allowed=0, refused=0))
    network_bytes: Annotated[
        NetworkBytes, described("Bytes through the sandbox's network allowlist, each way.")
    ] = msgspec.field(default_factory=lambda: NetworkBytes(sent=0, received=0))


class SessionResetParams(Params):
    session_id: Annotated[
        SessionId | None,
        described(
            "The session to reset; absent: every session of this connection's tenant"
            " (a warm pool's sandbox handed to its next task)."
        ),
    ] = None


class SessionResetInfo(Result):
    session_id: Annotated[str, described(_SESSION_ID)]
    processes_killed: Annotated[
        int, described("Processes of the session that were ended, its shell and jobs included.")
    ]
    commands_aborted: Annotated[int, described("Commands that were running, now aborted.")]
    jobs_ended: Annotated[
        int, described("Background jobs (`terminal/*`) of the session, killed and released.")
    ]
    tmp_entries_removed: Annotated[
        int, described("Entries removed from the session's private /tmp (0 when it has none).")
    ]
    cwd: Annotated[str, described("The directory it starts in again, as UTF-8 text.")]


class SessionResetResult(Result):
    sessions: Annotated[list[SessionResetInfo], described("What was cleaned, session by session.")]


# Method name -> (params type, result type); the schema generator and the
# dispatcher both read this table, so they cannot drift apart.
METHODS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct] | None]] = {
    "bash": (BashParams, BashResult),
    "abort_bash": (AbortBashParams, AbortBashResult),
    "session/open": (SessionOpenParams, SessionOpenResult),
    "session/close": (SessionCloseParams, SessionCloseResult),
    "session/list": (SessionListParams, SessionListResult),
    "bash/attach": (BashAttachParams, BashResult),
    "artifact/read": (ArtifactReadParams, ArtifactReadResult),
    "shutdown": (ShutdownParams, None),
    "pty/input": (PtyInputParams, PtyInputResult),
    "pty/resize": (PtyResizeParams, PtyResizeResult),
    "pty/screen": (PtyScreenParams, PtyScreen),
    "server/stats": (ServerStatsParams, ServerStatsResult),
    "session/reset": (SessionResetParams, SessionResetResult),
    "secrets/add": (SecretsAddParams, SecretsAddResult),
}

NOTIFICATIONS_FROM_CLIENT: dict[str, type[msgspec.Struct]] = {
    "exit": ExitParams,
}

NOTIFICATIONS_FROM_SERVER: dict[str, type[msgspec.Struct]] = {
    "bash/chunk": BashChunk,
    "pty/output": PtyOutput,
    "bash/needsInput": NeedsInput,
    "server/draining": ServerDraining,
}
