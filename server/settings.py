"""Settings: a TOML file decoded by msgspec into typed, validated structs.

A bad file must never surface as a traceback: every problem becomes one
`SettingsError` line naming the key, and the CLI exits with status 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, get_args

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.framing import DEFAULT_MAX_LINE_BYTES
from bashrpc.protocol.mcp import (
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    ConnectionSettings,
    InterceptorRule,
    TimeoutSeconds,
)
from bashrpc.protocol.methods import EnvName, NetworkMode, NetworkPolicy, SandboxMode
from bashrpc.server.errors import InvalidArgument
from bashrpc.server.output.artifacts import DEFAULT_MAX_TOTAL_BYTES
from bashrpc.server.output.keptbudget import DEFAULT_KEPT_BYTES, DEFAULT_MAX_KEPT_REQUESTS
from bashrpc.server.output.secretbook import DEFAULT_ENV_GLOBS
from bashrpc.server.output.secretforms import host_format
from bashrpc.server.output.sink import DEFAULT_MAX_BYTES
from bashrpc.server.runtime.network.rules import pattern_error, view
from bashrpc.server.runtime.seam.egress import (
    DEFAULT_IDLE_SECONDS as DEFAULT_NETWORK_IDLE_SECONDS,
)
from bashrpc.server.runtime.seam.egress import DEFAULT_MAX_CONNECTIONS, DEFAULT_PORTS, Egress

DEFAULT_KILL_GRACE_SECONDS = 2.0
DEFAULT_SNAPSHOT_SECONDS = 10.0
DEFAULT_MAX_SHELLS = 32
DEFAULT_IDLE_SECONDS = 900.0
DEFAULT_MAX_JOBS_PER_SESSION = 16
DEFAULT_MAX_JOBS = 64
DEFAULT_JOB_RING_BYTES = 1024 * 1024
# Smaller limits would refuse ordinary requests.
MIN_LINE_BYTES = 1024
# A day: past that, a silent client is as good as never timed out.
MAX_CLIENT_TIMEOUT_SECONDS = 86400.0
# An hour: longer than any orchestrator's termination grace.
MAX_DRAIN_SECONDS = 3600.0
DEFAULT_INPUT_SETTLE_SECONDS = 1.0
ENV_EXCLUDE_KEY = "exclude"
DEFAULT_MAX_CLIENTS = 64
MAX_CLIENTS_LIMIT = 4096
MAX_KEPT_REQUESTS_LIMIT = 4096
# Below this, one request's chunks in flight would not fit.
MIN_RESUME_BUDGET_BYTES = 1024 * 1024


class _Section(
    msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True, frozen=True
):
    pass


class OutputSettings(_Section, frozen=True):
    max_bytes: Annotated[int, msgspec.Meta(ge=1024, le=1024 * 1024 * 1024)] = DEFAULT_MAX_BYTES


class ArtifactSettings(_Section, frozen=True):
    dir: str | None = None
    max_total_bytes: Annotated[int, msgspec.Meta(ge=0)] = DEFAULT_MAX_TOTAL_BYTES
    # One artifact's cap; None: only the total applies.
    max_bytes: Annotated[int, msgspec.Meta(ge=0)] | None = None


class KillSettings(_Section, frozen=True):
    grace_seconds: Annotated[float, msgspec.Meta(ge=0, le=300)] = DEFAULT_KILL_GRACE_SECONDS
    # A cgroup v2 per shell where one can be created; false tracks by ancestry.
    cgroups: bool = True


class InterceptorSettings(_Section, frozen=True):
    enabled: bool = False
    # None: the built-in rules; a list replaces them.
    rules: tuple[InterceptorRule, ...] | None = None


class BashSettings(_Section, frozen=True):
    virtual_terminal: Literal["on", "off"] = "off"
    # Capture the user's rc (aliases, functions, options, PATH) for every shell.
    snapshot: bool = True
    # How long the rc may take before shells start without it.
    snapshot_timeout: Annotated[float, msgspec.Meta(gt=0, le=600)] = DEFAULT_SNAPSHOT_SECONDS


class SessionSettings(_Section, frozen=True):
    idle_seconds: Annotated[float, msgspec.Meta(gt=0)] = DEFAULT_IDLE_SECONDS
    max_shells: Annotated[int, msgspec.Meta(ge=1, le=4096)] = DEFAULT_MAX_SHELLS


class JobSettings(_Section, frozen=True):
    """Background jobs (`terminal/create`, `bash` with `background`)."""

    # Jobs not yet exited, in one session and in the whole server (a daemon: per tenant).
    max_per_session: Annotated[int, msgspec.Meta(ge=1, le=4096)] = DEFAULT_MAX_JOBS_PER_SESSION
    max_total: Annotated[int, msgspec.Meta(ge=1, le=4096)] = DEFAULT_MAX_JOBS
    # Output each job keeps in memory; the artifact keeps all of it.
    ring_bytes: Annotated[int, msgspec.Meta(ge=1024, le=1024 * 1024 * 1024)] = (
        DEFAULT_JOB_RING_BYTES
    )


Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
NETWORK_MODES: tuple[NetworkMode, ...] = get_args(NetworkMode)
# Why an allow or deny entry is none (None when it is one): for the flags too.
network_entry_error = pattern_error


class NetworkSettings(_Section, frozen=True):
    """`[sandbox.network]`: what a confined command may reach (docs/sandbox.md)."""

    # off: loopback alone; allowlist: `allow` through the server's proxy; host: all.
    mode: NetworkMode = "off"
    # Names (exact, or `*.` for subdomains only) and IP literals; deny wins.
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ports: tuple[Port, ...] = DEFAULT_PORTS
    # Connections one session's commands hold open through the proxy at once.
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=4096)] = DEFAULT_MAX_CONNECTIONS
    # Seconds a connection may pass no byte either way.
    idle_seconds: Annotated[float, msgspec.Meta(gt=0, le=86400)] = DEFAULT_NETWORK_IDLE_SECONDS

    def __post_init__(self) -> None:
        for field, entries in (("allow", self.allow), ("deny", self.deny)):
            for entry in entries:
                why = pattern_error(entry)
                if why is not None:
                    raise ValueError(
                        messages.NETWORK_BAD_ENTRY.format(field=field, entry=entry, why=why)
                    )

    @property
    def egress(self) -> Egress:
        return Egress(self.allow, self.deny, self.ports, self.max_connections, self.idle_seconds)


class SandboxSettings(_Section, frozen=True):
    mode: SandboxMode = "off"
    # Sandboxed modes only: false (mode off) gives the shell a network namespace with
    # loopback alone, true (mode host) the host's; a table, an allowlist.
    network: bool | NetworkSettings = False
    # Writable in `workspace-write`, besides the workspace.
    writable_roots: tuple[str, ...] = ()
    # Read-only inside the writable roots, besides what the host's git reads;
    # relative paths are taken in each root.
    protected_paths: tuple[str, ...] = ()
    # workspace-write: git dirs writable but for what decides what git runs, so
    # commits work; this makes files in the repositories (`git/guard.py`).
    git_commits: bool = False

    @property
    def net(self) -> NetworkSettings:
        """`network` as a table, whichever way it was written."""
        if isinstance(self.network, bool):
            return NetworkSettings(mode="host" if self.network else "off")
        return self.network

    def network_policy(self) -> NetworkPolicy:
        """What a session of this sandbox may reach (the host's network, unconfined)."""
        if self.mode in ("off", "full"):
            return view("host", None)
        return view(self.net.mode, self.net.egress)


OnEof = Literal["finish", "abort"]
ON_EOF_CHOICES: tuple[OnEof, ...] = ("finish", "abort")


class ServerSettings(_Section, frozen=True):
    # Seconds without a byte from the client (while the server waits for one)
    # after which it is taken for gone, as on EOF; None: never.
    client_timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_CLIENT_TIMEOUT_SECONDS)] | None = (
        None
    )
    # On SIGTERM, how long running commands may finish before they are aborted
    # (new ones are refused meanwhile); 0: shut down at once.
    drain_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_DRAIN_SECONDS)] = 0.0
    # The daemon's probes and metrics (`--http`): HOST:PORT, or None for none.
    http: str | None = None
    # What the end of stdin means: "finish" runs every request read, in order, and
    # answers it, then exits; "abort" aborts what runs (MCP's stdio shutdown).
    # None: finish for a regular file or /dev/null, abort for a pipe or a socket.
    on_eof: OnEof | None = None


class DaemonSettings(_Section, frozen=True):
    # Bytes that all kept requests (their chunks and results, for a resume) and
    # the requests in flight may hold together; past it, those whose connection
    # was cut give way, and a request the ones in flight cannot take is refused.
    resume_budget_bytes: Annotated[int, msgspec.Meta(ge=MIN_RESUME_BUDGET_BYTES)] = (
        DEFAULT_KEPT_BYTES
    )
    # Requests kept per tenant (a clientId, or a shared scope) for a resume.
    max_kept_requests: Annotated[int, msgspec.Meta(ge=1, le=MAX_KEPT_REQUESTS_LIMIT)] = (
        DEFAULT_MAX_KEPT_REQUESTS
    )
    # Tenants named by a clientId or a scope kept at once; a new one past it
    # ends the one detached longest ago, or is refused if every one is attached.
    max_clients: Annotated[int, msgspec.Meta(ge=1, le=MAX_CLIENTS_LIMIT)] = DEFAULT_MAX_CLIENTS


class SecretSettings(_Section, frozen=True):
    """What command output never shows (see the Secrets page)."""

    # Names of variables whose values are secrets, as globs.
    env: tuple[str, ...] = DEFAULT_ENV_GLOBS
    # The built-in token formats (private keys, cloud and API keys, JWTs, ...).
    patterns: bool = True
    # The host's own regular expressions, each redacted as `pattern_N`.
    extra_patterns: tuple[str, ...] = ()
    # Whether `bash` and `terminal/create` may ask `redact: false`.
    host_may_opt_out: bool = False

    def __post_init__(self) -> None:
        for index, pattern in enumerate(self.extra_patterns):
            host_format(index, pattern)


class InputSettings(_Section, frozen=True):
    """Commands that wait for their person (`bash/needsInput`)."""

    # How long a PTY command's processes (or a job's, on its stdin) must sit
    # blocked on their terminal, and nothing else, before the wait is told.
    settle_seconds: Annotated[float, msgspec.Meta(ge=0.1, le=60)] = DEFAULT_INPUT_SETTLE_SECONDS


class ToolSettings(_Section, frozen=True):
    default_timeout: TimeoutSeconds = DEFAULT_TOOL_TIMEOUT_SECONDS


class Settings(_Section, frozen=True):
    shell: str | None = None
    prefix: str | None = None
    # Variables for every shell; the key `exclude` instead lists glob patterns of
    # the server's own variables to keep out of commands (e.g. "*TOKEN*").
    env: dict[EnvName, str | list[str]] = msgspec.field(default_factory=dict)
    output: OutputSettings = OutputSettings()
    artifacts: ArtifactSettings = ArtifactSettings()
    kill: KillSettings = KillSettings()
    interceptor: InterceptorSettings = InterceptorSettings()
    bash: BashSettings = BashSettings()
    tool: ToolSettings = ToolSettings()
    input: InputSettings = InputSettings()
    sessions: SessionSettings = SessionSettings()
    jobs: JobSettings = JobSettings()
    sandbox: SandboxSettings = SandboxSettings()
    server: ServerSettings = ServerSettings()
    daemon: DaemonSettings = DaemonSettings()
    secrets: SecretSettings = SecretSettings()
    max_line_bytes: Annotated[int, msgspec.Meta(ge=MIN_LINE_BYTES)] = DEFAULT_MAX_LINE_BYTES
    # Run on uvloop when it is installed; false runs on asyncio's own loop.
    uvloop: bool = True

    def __post_init__(self) -> None:
        for name, value in self.env.items():
            if isinstance(value, list) and name != ENV_EXCLUDE_KEY:
                raise ValueError(messages.ENV_VALUE_NOT_STRING.format(name=name))
            if isinstance(value, str) and name == ENV_EXCLUDE_KEY:
                raise ValueError(messages.ENV_EXCLUDE_NOT_LIST)

    @property
    def env_vars(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if isinstance(v, str)}

    @property
    def env_exclude(self) -> list[str]:
        patterns = self.env.get(ENV_EXCLUDE_KEY, [])
        return patterns if isinstance(patterns, list) else []


class SettingsError(Exception):
    pass


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "bashrpc" / "config.toml"


def load(path: Path | None) -> Settings:
    """Read the given file, or the default one if it exists, else defaults."""
    explicit = path is not None
    target = path if path is not None else default_path()
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        if explicit:
            raise SettingsError(
                messages.CONFIG_ERROR.format(path=target, reason=messages.CONFIG_NOT_FOUND)
            ) from None
        return Settings()
    except OSError as exc:
        raise SettingsError(
            messages.CONFIG_ERROR.format(path=target, reason=exc.strerror)
        ) from None
    try:
        return msgspec.toml.decode(raw, type=Settings)
    except msgspec.DecodeError as exc:
        raise SettingsError(messages.CONFIG_ERROR.format(path=target, reason=exc)) from None


def with_overrides(settings: Settings, overrides: ConnectionSettings) -> Settings:
    """The file's settings with a connection's overrides applied, field by field."""
    replace = msgspec.structs.replace
    if not isinstance(overrides.interceptor, msgspec.UnsetType):
        o = overrides.interceptor
        section = settings.interceptor
        if not isinstance(o.enabled, msgspec.UnsetType):
            section = replace(section, enabled=o.enabled)
        if not isinstance(o.rules, msgspec.UnsetType):
            section = replace(section, rules=tuple(o.rules))
        settings = replace(settings, interceptor=section)
    if not isinstance(overrides.bash, msgspec.UnsetType) and not isinstance(
        overrides.bash.virtual_terminal, msgspec.UnsetType
    ):
        bash = replace(settings.bash, virtual_terminal=overrides.bash.virtual_terminal)
        settings = replace(settings, bash=bash)
    if not isinstance(overrides.tool, msgspec.UnsetType) and not isinstance(
        overrides.tool.default_timeout, msgspec.UnsetType
    ):
        tool = replace(settings.tool, default_timeout=overrides.tool.default_timeout)
        settings = replace(settings, tool=tool)
    if not isinstance(overrides.sandbox, msgspec.UnsetType) and not isinstance(
        overrides.sandbox.mode, msgspec.UnsetType
    ):
        mode = tightened(settings.sandbox.mode, overrides.sandbox.mode)
        settings = replace(settings, sandbox=replace(settings.sandbox, mode=mode))
    return settings


# Each mode allows less than the one before it.
SANDBOX_STRICTNESS: tuple[SandboxMode, ...] = ("off", "full", "workspace-write", "read-only")


def stricter(mode: SandboxMode, than: SandboxMode) -> bool:
    return SANDBOX_STRICTNESS.index(mode) > SANDBOX_STRICTNESS.index(than)


def tightened(configured: SandboxMode, requested: SandboxMode | None) -> SandboxMode:
    """The requested mode when it is at least as strict as the configured one."""
    if requested is None:
        return configured
    if SANDBOX_STRICTNESS.index(requested) < SANDBOX_STRICTNESS.index(configured):
        raise InvalidArgument(
            messages.SANDBOX_LOOSER.format(requested=requested, configured=configured)
        )
    return requested


def for_connection(
    current: Settings, file: Settings, overrides: ConnectionSettings | None
) -> Settings:
    """An `initialize`'s settings: the file's with the host's overrides, never with
    a sandbox looser than the connection already has. Asking for none keeps the
    connection's; asking for a looser one is refused."""
    settings = file if overrides is None else with_overrides(file, overrides)
    have, got = current.sandbox.mode, settings.sandbox.mode
    if SANDBOX_STRICTNESS.index(got) >= SANDBOX_STRICTNESS.index(have):
        return settings
    section = msgspec.UNSET if overrides is None else overrides.sandbox
    if not isinstance(section, msgspec.UnsetType) and not isinstance(
        section.mode, msgspec.UnsetType
    ):
        message = messages.SANDBOX_LOOSER_THAN_CONNECTION.format(requested=got, current=have)
        raise InvalidArgument(message)
    replace = msgspec.structs.replace
    return replace(settings, sandbox=replace(settings.sandbox, mode=have))
