"""The MCP-compatible surface: handshake, tools, resources and their notifications.

MCP clients send fields this server does not use (and newer revisions add
more), so these params accept unknown fields, unlike the native methods.
Tool arguments are the exception: the model's call is checked strictly.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from protocol.methods import MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, RequestId, SandboxMode

SUPPORTED_PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]
BASH_TOOL = "bash"
DEFAULT_TOOL_TIMEOUT_SECONDS = 300.0
ARTIFACT_URI_SCHEME = "artifact://"
ARTIFACT_URI_TEMPLATE = "artifact://{id}"
TEXT_MIME_TYPE = "text/plain"

# Terminal size limits shared by the host's `ui` and the PTY path.
MIN_COLS, MAX_COLS = 20, 400
MIN_ROWS, MAX_ROWS = 5, 200


class Open(msgspec.Struct, rename="camel", kw_only=True):
    """Base of MCP messages: unknown fields are accepted."""


class Strict(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """Base of the parts this server defines itself."""


# -- settings a host may override per connection ----------------------------


class InterceptorRule(
    msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True, frozen=True
):
    pattern: str
    tool: str
    message: str
    # Python `re` flag letters, e.g. "i" or "ms".
    flags: str | None = None
    # Reported in details.blocked.rule; the pattern is used when absent.
    name: str | None = None


class InterceptorOverrides(Strict):
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    rules: list[InterceptorRule] | msgspec.UnsetType = msgspec.UNSET


class BashOverrides(Strict):
    virtual_terminal: Literal["on", "off"] | msgspec.UnsetType = msgspec.UNSET


TimeoutSeconds = Annotated[float, msgspec.Meta(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS)]


class SandboxOverrides(Strict):
    # Only as strict as the configured mode, or stricter.
    mode: SandboxMode | msgspec.UnsetType = msgspec.UNSET


class ToolOverrides(Strict):
    default_timeout: TimeoutSeconds | msgspec.UnsetType = msgspec.UNSET


class ConnectionSettings(Strict):
    interceptor: InterceptorOverrides | msgspec.UnsetType = msgspec.UNSET
    bash: BashOverrides | msgspec.UnsetType = msgspec.UNSET
    tool: ToolOverrides | msgspec.UnsetType = msgspec.UNSET
    sandbox: SandboxOverrides | msgspec.UnsetType = msgspec.UNSET


# -- initialize --------------------------------------------------------------


class UiSize(Strict):
    cols: int
    rows: int


class HostOptions(Strict):
    """What the host tells us about itself, in initializationOptions."""

    tool_names: list[str] = msgspec.field(default_factory=list)
    # Present when the host can render a terminal.
    ui: UiSize | None = None
    settings: ConnectionSettings | None = None
    # Notifications outside MCP that the host asks for (`tool/update`): a plain
    # MCP client would reject them, so they are sent only on request.
    notifications: list[str] = msgspec.field(default_factory=list)
    opt_out_notifications: list[str] = msgspec.field(default_factory=list)


class Implementation(Open):
    name: str
    version: str


class Experimental(Open):
    bashrpc: HostOptions | None = None


class ClientCapabilities(Open):
    experimental: Experimental | None = None


class InitializeParams(Open):
    protocol_version: str
    capabilities: ClientCapabilities = msgspec.field(default_factory=ClientCapabilities)
    client_info: Implementation | None = None
    initialization_options: HostOptions | None = None


class ServerCapabilities(Open):
    tools: dict[str, Any] = msgspec.field(default_factory=dict)
    resources: dict[str, Any] = msgspec.field(default_factory=dict)


class InitializeResult(Open):
    protocol_version: str
    server_info: Implementation
    capabilities: ServerCapabilities
    instructions: str


class EmptyParams(Open):
    pass


class EmptyResult(Open):
    pass


# -- tools -------------------------------------------------------------------


_Count = Annotated[int, msgspec.Meta(ge=0)]

# What a model reads about each argument: written for the model, not for us.
_COMMAND_HELP = (
    "The bash command to run, as you would type it in a terminal. It gets no input:"
    " a command that waits for a keypress or a password fails instead of hanging."
)
_TIMEOUT_HELP = (
    "Seconds to let the command run before it is stopped (from 1 to 3600)."
    " Raise it for long builds or test suites."
)
_CWD_HELP = "Directory to run in, relative to the workspace root. Default: the workspace root."
_HEAD_HELP = (
    "Return only the first N lines of the output (applied before tail)."
    " Prefer this to piping into head: the command's exit code is kept."
)
_TAIL_HELP = (
    "Return only the last N lines of the output."
    " Prefer this to piping into tail: the command's exit code is kept."
)


class BashToolArguments(Strict):
    """What a model may pass to the bash tool (its inputSchema is generated from this)."""

    command: Annotated[str, msgspec.Meta(description=_COMMAND_HELP)]
    # None: the configured default (tool.defaultTimeout), which tools/list advertises.
    # Descriptions sit on the whole optional type, where clients show them.
    timeout: Annotated[float | None, msgspec.Meta(description=_TIMEOUT_HELP)] = None
    cwd: Annotated[str | None, msgspec.Meta(description=_CWD_HELP)] = None
    head: Annotated[_Count | None, msgspec.Meta(description=_HEAD_HELP)] = None
    tail: Annotated[_Count | None, msgspec.Meta(description=_TAIL_HELP)] = None


class Tool(Open, omit_defaults=True):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


class ToolsListResult(Open):
    tools: list[Tool]


class RequestMeta(Open):
    progress_token: str | int | None = None


class ToolsCallParams(Open):
    name: str
    # Decoded later, strictly, into the named tool's own arguments type.
    arguments: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    meta: RequestMeta | None = msgspec.field(default=None, name="_meta")


class TextContent(Open, kw_only=True):
    type: Literal["text"] = "text"
    text: str


class ShownRange(Open):
    start: int
    end: int


class Truncation(Open, omit_defaults=True):
    direction: Literal["tail"]
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    shown_range: ShownRange
    # The cap that cut; absent when the call's own head/tail chose the lines.
    truncated_by: Literal["bytes", "lines"] | None = None
    artifact_id: int | None = None
    # The artifact stopped at a size cap (`artifacts.maxBytes` or `maxTotalBytes`).
    artifact_truncated: bool = False


class Recovery(Open, omit_defaults=True):
    """What to call instead, with the arguments read off the blocked command."""

    tool: str
    pattern: str | None = None
    path: str | None = None


class Blocked(Open):
    suggested_tool: str
    rule: str
    recovery: Recovery


class DetailsMeta(Open):
    truncation: Truncation


class ToolDetails(Open, omit_defaults=True):
    blocked: Blocked | None = None
    meta: DetailsMeta | None = None


class BashStructured(Open):
    """The whole result, for clients that show structured content instead of text."""

    # The same text as the result's text content.
    output: str
    exit_code: int | None
    cancelled: bool
    timed_out: bool
    truncation: Truncation | None
    # Where the full output is, when the text shows only part of it.
    artifact_uri: str | None = None
    # The command failed writing outside the sandbox's writable roots.
    sandbox_denied: bool = False
    # The shell's state (variables, functions, exports) was lost since the last result.
    shell_restarted: bool = False


class CallToolResult(Open, omit_defaults=True):
    content: list[TextContent]
    structured_content: BashStructured | None = None
    is_error: bool = False
    details: ToolDetails | None = None


class CancelledOutput(Open):
    """`data` of the -32800 error that answers a cancelled tool call."""

    output: str


# -- resources ---------------------------------------------------------------


class Resource(Open, omit_defaults=True):
    uri: str
    name: str
    mime_type: str = TEXT_MIME_TYPE
    size: int | None = None


class ResourcesListResult(Open):
    resources: list[Resource]


class ResourceTemplate(Open):
    uri_template: str
    name: str
    description: str
    mime_type: str = TEXT_MIME_TYPE


class ResourceTemplatesListResult(Open):
    resource_templates: list[ResourceTemplate]


class ResourcesReadParams(Open):
    uri: str


class ContentMeta(Open):
    truncated: bool
    total_bytes: int
    next_offset: int | None


class TextResourceContents(Open, omit_defaults=True):
    uri: str
    mime_type: str
    text: str
    meta: ContentMeta | None = msgspec.field(default=None, name="_meta")


class ResourcesReadResult(Open):
    contents: list[TextResourceContents]


# -- notifications -------------------------------------------------------------


class CancelledParams(Open):
    request_id: RequestId
    reason: str | None = None


class CancelRequestParams(Open):
    id: RequestId


class ToolUpdate(Open):
    """`tool/update`: the current tail of a running tool call, as a snapshot."""

    request_id: RequestId | None
    content: list[TextContent]


class ProgressParams(Open):
    progress_token: str | int
    progress: int
    message: str


METHODS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct] | None]] = {
    "initialize": (InitializeParams, InitializeResult),
    "ping": (EmptyParams, EmptyResult),
    "tools/list": (EmptyParams, ToolsListResult),
    "tools/call": (ToolsCallParams, CallToolResult),
    "resources/list": (EmptyParams, ResourcesListResult),
    "resources/templates/list": (EmptyParams, ResourceTemplatesListResult),
    "resources/read": (ResourcesReadParams, ResourcesReadResult),
}

NOTIFICATIONS_FROM_CLIENT: dict[str, type[msgspec.Struct]] = {
    "notifications/initialized": EmptyParams,
    "notifications/cancelled": CancelledParams,
    "$/cancelRequest": CancelRequestParams,
}

NOTIFICATIONS_FROM_SERVER: dict[str, type[msgspec.Struct]] = {
    "tool/update": ToolUpdate,
    "notifications/progress": ProgressParams,
}
