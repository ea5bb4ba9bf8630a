"""The MCP-compatible surface: handshake, tools, resources and their notifications.

MCP clients send fields this server does not use (and newer revisions add
more), so these params accept unknown fields, unlike the native methods.
Tool arguments are the exception: the model's call is checked strictly, with
only the leniencies of `bashrpc.server.services.tool.args` (numeric strings, nulls).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.methods import (
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    CallMeta,
    NetworkPolicy,
    RequestId,
    SandboxMode,
    described,
)

SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]
# The revisions without `initialize`: each request names its revision in `_meta`.
MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
# Every revision served, for server/discover and the -32022 that names them.
ALL_PROTOCOL_VERSIONS = (*MODERN_PROTOCOL_VERSIONS, *SUPPORTED_PROTOCOL_VERSIONS)
# Methods the modern revisions removed: -32601 to a request of theirs.
REMOVED_IN_MODERN = frozenset({"ping", "logging/setLevel"})
SERVER_NAME = "bashrpc"
# 2026-07-28's tasks, an extension a client declares in its per-request capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# Its notification of a task's status.
TASK_NOTIFICATION = "notifications/tasks"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
# The revisions that have tasks, and the notification of a task's status.
TASK_REVISIONS = frozenset({"2025-11-25"})
TASK_STATUS = "notifications/tasks/status"
BASH_TOOL = "bash"
# The model's two tools for the jobs `run_in_background` starts.
BASH_OUTPUT_TOOL = "bash_output"
BASH_KILL_TOOL = "bash_kill"
BASH_INPUT_TOOL = "bash_input"
DEFAULT_TOOL_TIMEOUT_SECONDS = 300.0
ARTIFACT_URI_SCHEME = "artifact://"
# A clientId names an owner; longer ones are a mistake, not a name.
MAX_CLIENT_ID_CHARS = 256
# The same for a shared scope's name.
MAX_SCOPE_CHARS = 256
ARTIFACT_URI_TEMPLATE = "artifact://{id}"
TEXT_MIME_TYPE = "text/plain"
_ARTIFACT_URI = "The artifact's URI, artifact://N."
_MIME_TYPE = "The media type of its content."

# Terminal size limits shared by the host's `ui` and the PTY path.
MIN_COLS, MAX_COLS = 20, 400
MIN_ROWS, MAX_ROWS = 5, 200


class Open(msgspec.Struct, rename="camel", kw_only=True):
    """Base of MCP messages: unknown fields are accepted. What only a client
    writes omits its defaults, as a hand-written request would; results the
    server writes keep every field."""


class Strict(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """Base of the parts this server defines itself."""


# -- settings a host may override per connection ----------------------------


class InterceptorRule(
    msgspec.Struct,
    rename="camel",
    kw_only=True,
    forbid_unknown_fields=True,
    frozen=True,
    omit_defaults=True,
):
    pattern: Annotated[
        str, described("A Python regex, searched in the whole command and in each simple one.")
    ]
    tool: Annotated[
        str, described("The tool to suggest; the rule applies only if the host has it.")
    ]
    message: Annotated[str, described("Why the command is blocked, shown to the model.")]
    flags: Annotated[str | None, described('Python `re` flag letters, e.g. "i" or "ms".')] = None
    name: Annotated[
        str | None, described("Reported in details.blocked.rule; the pattern when absent.")
    ] = None


class InterceptorOverrides(Strict):
    enabled: (
        Annotated[bool, described("Whether tool calls are intercepted.")] | msgspec.UnsetType
    ) = msgspec.UNSET
    rules: (
        Annotated[list[InterceptorRule], described("Rules that replace the default ones.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class BashOverrides(Strict):
    virtual_terminal: (
        Annotated[Literal["on", "off"], described('"on": tool calls may run on a PTY.')]
        | msgspec.UnsetType
    ) = msgspec.UNSET


TimeoutSeconds = Annotated[float, msgspec.Meta(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS)]


class SandboxOverrides(Strict):
    mode: (
        Annotated[SandboxMode, described("Only as strict as the configured mode, or stricter.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class ToolOverrides(Strict):
    default_timeout: (
        Annotated[
            TimeoutSeconds, described("Seconds a tool call may run when it names no timeout.")
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class ConnectionSettings(Strict):
    interceptor: (
        Annotated[InterceptorOverrides, described("Overrides of the `interceptor` settings.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    bash: Annotated[BashOverrides, described("Overrides of the `bash` settings.")] | (
        msgspec.UnsetType
    ) = msgspec.UNSET
    tool: Annotated[ToolOverrides, described("Overrides of the `tool` settings.")] | (
        msgspec.UnsetType
    ) = msgspec.UNSET
    sandbox: Annotated[SandboxOverrides, described("Overrides of the `sandbox` settings.")] | (
        msgspec.UnsetType
    ) = msgspec.UNSET


# -- every request and result ---------------------------------------------------


class Icon(Open, omit_defaults=True):
    """An image a client may show for the server or a tool (2025-11-25 on)."""

    src: Annotated[str, described("The image, here a data: URI: nothing to fetch.")]
    mime_type: Annotated[str | None, described("Its media type.")] = None
    sizes: Annotated[list[str] | None, described('The sizes it suits ("any": a vector image).')] = (
        None
    )


class Implementation(Open, omit_defaults=True):
    name: Annotated[str, described("The program's name.")]
    version: Annotated[str, described("The program's version.")]
    icons: Annotated[
        list[Icon] | None, described("Images a client may show for it (2025-11-25 on).")
    ] = None


class RequestMeta(CallMeta, rename="camel"):
    """A tool call's `_meta`: its trace context, and the token of its progress."""

    progress_token: Annotated[
        object,
        described(
            "Send notifications/progress for this call with this token."
            " Used when a string or an integer; a value of another type is ignored."
        ),
    ] = None

    # 2026-07-28: every request names its revision, and says who the client is
    # and what it can do; read by `bashrpc.server.surfaces.era`.
    protocol_version: Annotated[
        object, described("The MCP revision of this request (2026-07-28 on); a string.")
    ] = msgspec.field(default=None, name=PROTOCOL_VERSION_KEY)
    client_capabilities: Annotated[
        object, described("What the client can do, for this request (2026-07-28 on).")
    ] = msgspec.field(default=None, name="io.modelcontextprotocol/clientCapabilities")
    client_info: Annotated[
        object, described("The client program (2026-07-28 on), for the log.")
    ] = msgspec.field(default=None, name="io.modelcontextprotocol/clientInfo")

    @property
    def progress(self) -> str | int | None:
        token = self.progress_token
        if isinstance(token, bool) or not isinstance(token, str | int):
            return None
        return token


class Params(Open, omit_defaults=True):
    """Base of MCP params: each may carry `_meta`."""

    meta: Annotated[RequestMeta | None, described("MCP request metadata.")] = msgspec.field(
        default=None, name="_meta"
    )

    @property
    def modern(self) -> bool:
        """The request names a revision without `initialize` (2026-07-28)."""
        return self.meta is not None and self.meta.protocol_version in MODERN_PROTOCOL_VERSIONS

    def _declared(self, name: str) -> dict[str, object] | None:
        """What a modern request's client declares of one capability, if it does."""
        capabilities = None if self.meta is None else self.meta.client_capabilities
        if not self.modern or not isinstance(capabilities, dict):
            return None
        declared = capabilities.get(name)
        return declared if isinstance(declared, dict) else None

    def revision(self, negotiated: str | None) -> str | None:
        """The revision the request is of: the modern one it names, else the one
        its connection's `initialize` settled (`negotiated`)."""
        return str(self.meta.protocol_version) if self.modern and self.meta else negotiated

    @property
    def wants_tasks(self) -> bool:
        """A modern request whose client declares the tasks extension."""
        extensions = self._declared("extensions")
        return extensions is not None and TASKS_EXTENSION in extensions

    @property
    def wants_elicitation(self) -> bool:
        """A modern request whose client declares elicitation (its form mode: an
        empty declaration means it, as MCP has it)."""
        elicitation = self._declared("elicitation")
        if elicitation is None:
            return False
        return not elicitation or isinstance(elicitation.get("form"), dict)


class RelatedTask(Open):
    task_id: Annotated[str, described("The task the result is of.")]


class ResultMeta(Open, omit_defaults=True):
    related_task: Annotated[RelatedTask | None, described("The task the result is of.")] = (
        msgspec.field(default=None, name="io.modelcontextprotocol/related-task")
    )
    server_info: Annotated[Implementation | None, described("This server (2026-07-28 on).")] = (
        msgspec.field(default=None, name="io.modelcontextprotocol/serverInfo")
    )


class Result(Open):
    """Base of MCP results: from 2026-07-28 each says what kind it is."""

    result_type: (
        Annotated[str, described('"complete" (2026-07-28 on; absent before).')] | msgspec.UnsetType
    ) = msgspec.UNSET
    meta: Annotated[ResultMeta, described("MCP result metadata.")] | msgspec.UnsetType = (
        msgspec.field(default=msgspec.UNSET, name="_meta")
    )


class Cacheable(Result, kw_only=True):
    """A result a 2026-07-28 client may cache: for how long, and for whom."""

    cache_scope: (
        Annotated[Literal["private", "public"], described("Who may reuse it: this client.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    ttl_ms: (
        Annotated[int, described("Milliseconds it stays fresh: 0, it follows the settings.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET


# -- initialize --------------------------------------------------------------


class UiSize(Strict):
    cols: Annotated[int, described("Terminal columns the host renders.")]
    rows: Annotated[int, described("Terminal rows the host renders.")]


class HostOptions(Strict, omit_defaults=True):
    """What the host tells us about itself, in initializationOptions."""

    tool_names: Annotated[list[str], described("The tools the host's agent has.")] = msgspec.field(
        default_factory=list
    )
    ui: Annotated[
        UiSize | None, described("The terminal size; present when the host can render one.")
    ] = None
    settings: Annotated[
        ConnectionSettings | None,
        described("Overrides of the file's settings, for this connection."),
    ] = None
    # Notifications outside MCP that the host asks for (`tool/update`): a plain
    # MCP client would reject them, so they are sent only on request.
    notifications: Annotated[
        list[str], described('Notifications outside MCP the host wants: "tool/update".')
    ] = msgspec.field(default_factory=list)
    opt_out_notifications: Annotated[
        list[str], described('Notifications not to send: "tool/update", "notifications/progress".')
    ] = msgspec.field(default_factory=list)
    client_id: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CLIENT_ID_CHARS)] | None,
        described(
            "Under `bashrpc daemon`: who owns this connection's sessions. A later "
            "connection with the same clientId lists and drives them, and they outlive "
            "a cut connection for the daemon's --detach-grace."
        ),
    ] = None
    scope: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SCOPE_CHARS)] | None,
        described(
            "Under `bashrpc daemon`: a shared scope to join. Every connection naming "
            "it, whatever its clientId, lists and drives the scope's sessions instead "
            "of its owner's own; they outlive the scope's last connection for the "
            "--detach-grace. A convenience between one user's clients, not a trust boundary."
        ),
    ] = None
    workspace: Annotated[
        str | None,
        described(
            "The workspace (an absolute path) the host expects the server to serve:"
            " -32602, naming the server's, when it serves another. `bashrpc attach"
            " --workspace` sends it to a daemon already running."
        ),
    ] = None


class Experimental(Open, omit_defaults=True):
    bashrpc: Annotated[
        HostOptions | None,
        described("The same as initializationOptions, for hosts that cannot send those."),
    ] = None


class ClientCapabilities(Open, omit_defaults=True):
    experimental: Annotated[
        Experimental | None, described("Non-standard capabilities; bashrpc reads its own.")
    ] = None


class InitializeParams(Open, omit_defaults=True):
    protocol_version: Annotated[str, described("The MCP revision the client speaks.")]
    capabilities: Annotated[ClientCapabilities, described("What the client supports.")] = (
        msgspec.field(default_factory=ClientCapabilities)
    )
    client_info: Annotated[Implementation | None, described("The client program.")] = None
    initialization_options: Annotated[
        HostOptions | None, described("What the host tells bashrpc about itself.")
    ] = None


class TaskRequests(Open):
    tools: Annotated[dict[str, Any], described("`tools/call` may ask for a task.")] = msgspec.field(
        default_factory=lambda: {"call": {}}
    )


class TasksCapability(Open):
    """What this server does with tasks (2025-11-25)."""

    list: Annotated[dict[str, Any], described("The server has tasks/list.")] = msgspec.field(
        default_factory=dict
    )
    cancel: Annotated[dict[str, Any], described("The server has tasks/cancel.")] = msgspec.field(
        default_factory=dict
    )
    requests: Annotated[TaskRequests, described("The requests that may ask for a task.")] = (
        msgspec.field(default_factory=TaskRequests)
    )


class ServerCapabilities(Open):
    tools: Annotated[dict[str, Any], described("The server has tools.")] = msgspec.field(
        default_factory=dict
    )
    resources: Annotated[dict[str, Any], described("The server has resources.")] = msgspec.field(
        default_factory=dict
    )
    tasks: (
        Annotated[TasksCapability, described("Tasks, from 2025-11-25: a bash call as a job.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    extensions: (
        Annotated[dict[str, Any], described("Extensions (2026-07-28): tasks.")] | msgspec.UnsetType
    ) = msgspec.UNSET


class InitializeResult(Open):
    protocol_version: Annotated[
        str, described("The client's revision when supported, else the latest one.")
    ]
    server_info: Annotated[Implementation, described("This server.")]
    capabilities: Annotated[ServerCapabilities, described("What this server offers.")]
    instructions: Annotated[str, described("How to use this server, for the model.")]
    network: Annotated[
        NetworkPolicy | None,
        described("What this connection's sessions' commands may reach over the network."),
    ] = None


class DiscoverResult(Cacheable, kw_only=True):
    """`server/discover` (2026-07-28): what `initialize` said, asked any time."""

    supported_versions: Annotated[list[str], described("Every MCP revision served.")]
    capabilities: Annotated[ServerCapabilities, described("What this server offers.")]
    instructions: Annotated[str, described("How to use this server, for the model.")]


class EmptyParams(Params, kw_only=True):
    pass


class EmptyResult(Result, kw_only=True):
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

    # Optional arguments are UNSET when absent, not None, so the schema declares each
    # as its plain type, left out of `required`: an `anyOf` with null confuses generic
    # clients' forms. They are decoded leniently (`bashrpc.server.services.tool.args`):
    # numeric strings count as numbers, and null as absent.
    command: Annotated[str, msgspec.Meta(description=_COMMAND_HELP)]
    # Absent: the configured default (tool.defaultTimeout), which tools/list advertises.
    timeout: Annotated[float, msgspec.Meta(description=_TIMEOUT_HELP)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    cwd: Annotated[str, msgspec.Meta(description=_CWD_HELP)] | msgspec.UnsetType = msgspec.UNSET
    head: Annotated[_Count, msgspec.Meta(description=_HEAD_HELP)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    tail: Annotated[_Count, msgspec.Meta(description=_TAIL_HELP)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    run_in_background: (
        Annotated[bool, msgspec.Meta(description=messages.RUN_IN_BACKGROUND_HELP)]
        | msgspec.UnsetType
    ) = msgspec.field(default=msgspec.UNSET, name="run_in_background")


class JobToolArguments(Strict):
    """What a model passes to `bash_output` and `bash_kill`."""

    terminal_id: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=256,
            description="The background job's id, as the bash tool gave it (term-N).",
        ),
    ] = msgspec.field(name="terminal_id")


class JobInputArguments(JobToolArguments):
    """What a model passes to `bash_input`: the job, and what to type."""

    text: Annotated[
        str,
        msgspec.Meta(max_length=65536, description="The text to type (one answer, one line)."),
    ]
    enter: Annotated[
        bool, msgspec.Meta(description="Press Enter after the text (default true).")
    ] = True


class ToolAnnotations(Open):
    """What the tool does to the world, as MCP's hints say it (since 2025-03-26)."""

    read_only_hint: Annotated[bool, described("The tool changes nothing.")]
    destructive_hint: Annotated[bool, described("The tool may destroy or overwrite.")]
    idempotent_hint: Annotated[bool, described("Calling it twice does no more than once.")]
    open_world_hint: Annotated[
        bool,
        described("It may reach the network: unless the sandbox has it off."),
    ]


class ToolExecution(Open):
    """How the tool may run (2025-11-25)."""

    task_support: Annotated[
        Literal["forbidden", "optional", "required"],
        described('"optional": a tools/call may ask for a task.'),
    ]


class Tool(Open, omit_defaults=True):
    name: Annotated[str, described("The tool's name, for tools/call.")]
    description: Annotated[str, described("What the tool does, for the model.")]
    input_schema: Annotated[dict[str, Any], described("The JSON Schema of its arguments.")]
    title: Annotated[str | None, described("A name for people to read.")] = None
    output_schema: Annotated[
        dict[str, Any] | None, described("The JSON Schema of its structuredContent.")
    ] = None
    annotations: Annotated[
        ToolAnnotations | None, described("What the tool does to the world.")
    ] = None
    execution: Annotated[ToolExecution | None, described("How the tool may run.")] = None
    icons: Annotated[
        list[Icon] | None, described("Images a client may show for it (2025-11-25 on).")
    ] = None


class ToolsListResult(Cacheable, kw_only=True):
    tools: Annotated[list[Tool], described("The tools: `bash`, `bash_output`, `bash_kill`.")]


class TaskMetadata(Open, omit_defaults=True):
    """A `tools/call`'s `task`: run it as a task (2025-11-25)."""

    ttl: Annotated[
        int | None,
        described("Milliseconds to keep the task from its creation; the server may cut it."),
    ] = None


TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class Task(Result, omit_defaults=True, kw_only=True):
    """A task: a `tools/call` run as a background job, polled for its result."""

    task_id: Annotated[str, described("The task's id: the job's terminal id.")]
    status: Annotated[
        TaskStatus, described("working until the command ends, then completed or cancelled.")
    ]
    created_at: Annotated[str, described("When it was created, ISO 8601.")]
    last_updated_at: Annotated[str, described("When its status last changed, ISO 8601.")]
    ttl: Annotated[int | None, described("Milliseconds it is kept from its creation, once ended.")]
    poll_interval: Annotated[int | None, described("Milliseconds between polls, suggested.")] = None
    status_message: Annotated[
        str | None, described("How the command ended; while working, what it waits for.")
    ] = None
    # Never sent itself: what a 2026-07-28 task (`TaskV2`) holds once completed.
    result: (
        Annotated[CallToolResult, described("Unused in 2025-11-25: see TaskV2.")]
        | msgspec.UnsetType
    ) = msgspec.UNSET


class TaskV2(Result, omit_defaults=True, kw_only=True):
    """A task as 2026-07-28's tasks extension has it: made by a `tools/call`
    (`resultType: "task"`), read with tasks/get, which holds the result once
    the command ended."""

    task_id: Annotated[str, described("The task's id: the job's terminal id.")]
    status: Annotated[TaskStatus, described("working, then completed or cancelled.")]
    created_at: Annotated[str, described("When it was created, ISO 8601.")]
    last_updated_at: Annotated[str, described("When its status last changed, ISO 8601.")]
    ttl_ms: Annotated[int | None, described("Milliseconds it is kept from its creation.")]
    poll_interval_ms: Annotated[int | None, described("Milliseconds between polls.")] = None
    status_message: Annotated[
        str | None, described("How the command ended; while working, what it waits for.")
    ] = None
    result: Annotated[CallToolResult | None, described("The call's result, once completed.")] = None


def task_v2(task: Task) -> TaskV2:
    """The task as the 2026-07-28 extension names its fields."""
    return TaskV2(
        task_id=task.task_id,
        status=task.status,
        created_at=task.created_at,
        last_updated_at=task.last_updated_at,
        ttl_ms=task.ttl,
        poll_interval_ms=task.poll_interval,
        status_message=task.status_message,
        result=None if isinstance(task.result, msgspec.UnsetType) else task.result,
    )


class TaskParams(Params, kw_only=True):
    task_id: Annotated[str, described("The task's id.")]


class TasksListResult(Result, kw_only=True):
    tasks: Annotated[list[Task], described("This client's tasks not yet expired, oldest first.")]


class ElicitResult(Open, omit_defaults=True):
    """What the user answered an elicitation's form."""

    action: Annotated[
        Literal["accept", "decline", "cancel"], described("What the user did with the form.")
    ]
    content: Annotated[
        dict[str, str | int | float | bool] | None,
        described("The form's values, when accepted."),
    ] = None


class InputResponse(Open, omit_defaults=True):
    """2026-07-28: the client's answer to one of a result's `inputRequests`, under its
    key: `{"result": ...}`, or the result itself."""

    result: Annotated[ElicitResult | None, described("The answer.")] = None
    action: Annotated[
        Literal["accept", "decline", "cancel"] | None, described("The answer's action, unwrapped.")
    ] = None
    content: Annotated[
        dict[str, str | int | float | bool] | None, described("The answer's values, unwrapped.")
    ] = None

    def elicited(self) -> ElicitResult | None:
        if self.result is not None:
            return self.result
        return (
            None if self.action is None else ElicitResult(action=self.action, content=self.content)
        )


class TaskUpdateParams(Params, kw_only=True):
    task_id: Annotated[str, described("The task's id.")]
    input_responses: Annotated[
        dict[str, InputResponse],
        described("Answers to the task's input requests (it makes none: refused)."),
    ] = msgspec.field(default_factory=dict)


class ToolsCallParams(Params, kw_only=True):
    name: Annotated[
        str,
        described("The tool to call: `bash`, `bash_output`, `bash_kill` or `bash_input`."),
    ]
    # Decoded later, strictly, into the named tool's own arguments type.
    arguments: Annotated[
        msgspec.Raw, described("The tool's arguments, as its inputSchema says.")
    ] = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))
    task: Annotated[
        TaskMetadata | None, described("Run the call as a task: the result is the task.")
    ] = None
    input_responses: Annotated[
        dict[str, InputResponse] | None,
        described(
            "2026-07-28: the answers to an `input_required` result's `inputRequests`, by"
            " key, sent with the same call again."
        ),
    ] = None
    request_state: Annotated[
        Annotated[str, msgspec.Meta(max_length=4096)] | None,
        described("2026-07-28: an `input_required` result's `requestState`, echoed as given."),
    ] = None


class TextContent(Open, tag_field="type", tag="text"):
    text: Annotated[str, described("The text.")]


class ResourceLink(Open, omit_defaults=True, tag_field="type", tag="resource_link"):
    """An artifact the text names, as a resource to read (since 2025-06-18)."""

    uri: Annotated[str, described(_ARTIFACT_URI)]
    name: Annotated[str, described("A name to show for it.")]
    mime_type: Annotated[str, described(_MIME_TYPE)] = TEXT_MIME_TYPE
    description: Annotated[str | None, described("What it holds.")] = None


Content = TextContent | ResourceLink


class ShownRange(Open):
    start: Annotated[int, described("The first line shown, from 1.")]
    end: Annotated[int, described("The last line shown.")]


class Truncation(Open, omit_defaults=True):
    direction: Annotated[Literal["tail"], described("Which end of the output is kept.")]
    total_lines: Annotated[int, described("Lines of the whole output.")]
    total_bytes: Annotated[int, described("Bytes of the whole output.")]
    output_lines: Annotated[int, described("Lines shown.")]
    output_bytes: Annotated[int, described("Bytes shown.")]
    shown_range: Annotated[ShownRange, described("The lines shown, of the whole output.")]
    truncated_by: Annotated[
        Literal["bytes", "lines"] | None,
        described("The cap that cut; absent when the call's own head/tail chose the lines."),
    ] = None
    artifact_id: Annotated[int | None, described("The artifact holding the whole output.")] = None
    artifact_truncated: Annotated[
        bool, described("The artifact stopped at a size cap (artifacts.maxBytes or maxTotalBytes).")
    ] = False


class Recovery(Open, omit_defaults=True):
    """What to call instead, with the arguments read off the blocked command."""

    tool: Annotated[str, described("The tool to call instead.")]
    pattern: Annotated[str | None, described("The pattern to pass it, when there is one.")] = None
    path: Annotated[
        str | None, described("The path to pass it, relative to the workspace, when there is one.")
    ] = None


class Blocked(Open):
    suggested_tool: Annotated[str, described("The tool to call instead.")]
    rule: Annotated[str, described("The rule that blocked the command.")]
    recovery: Annotated[Recovery, described("The call to make instead.")]


class DetailsMeta(Open):
    truncation: Annotated[Truncation, described("How the output was cut.")]


class ToolDetails(Open, omit_defaults=True):
    blocked: Annotated[
        Blocked | None, described("Present when the interceptor blocked the command.")
    ] = None
    meta: Annotated[DetailsMeta | None, described("Present when the output was cut.")] = None


class BashStructured(Open):
    """The whole result, for clients that show structured content instead of text."""

    output: Annotated[str, described("The same text as the result's text content.")]
    exit_code: Annotated[
        int | None, described("The command's exit status; null when there is none.")
    ]
    cancelled: Annotated[bool, described("The command was aborted, or timed out.")]
    timed_out: Annotated[bool, described("The command was stopped at its timeout.")]
    truncation: Annotated[
        Truncation | None, described("How the output was cut; null when it was shown whole.")
    ]
    artifact_uri: Annotated[
        str | None, described("Where the full output is, when the text shows only part of it.")
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
            "The shell's state (variables, functions, exports) was lost since the last result."
        ),
    ] = False
    queued_seconds: Annotated[
        float, described("Seconds the command waited behind the session's earlier commands.")
    ] = 0.0


class FormField(Open, omit_defaults=True):
    type: Annotated[Literal["string"], described("The value's type.")]
    title: Annotated[str | None, described("What to show beside the field.")] = None
    description: Annotated[str | None, described("More about it.")] = None


class FormSchema(Open, kw_only=True):
    """An elicitation's form: a flat object of plain values, as MCP allows."""

    type: Annotated[Literal["object"], described("Always an object.")] = "object"
    properties: Annotated[dict[str, FormField], described("Its fields.")]
    required: Annotated[list[str], described("The fields an answer must hold.")]


class ElicitParams(Open, kw_only=True):
    mode: Annotated[Literal["form"], described("A form the client shows its user.")] = "form"
    message: Annotated[str, described("What the user is asked, and why.")]
    requested_schema: Annotated[FormSchema, described("The form.")]


class InputRequest(Open):
    """A request the client puts to its user before it sends the call again."""

    method: Annotated[Literal["elicitation/create"], described("What is asked of the client.")]
    params: Annotated[ElicitParams, described("The elicitation.")]


class CallToolResult(Result, omit_defaults=True, kw_only=True):
    """A tool's result; or, for a call with `task`, MCP's CreateTaskResult: `task`
    alone; or 2026-07-28's input_required (the call needs its user's answer first):
    `inputRequests` and `requestState` alone. The client answers the requests and
    sends the same call with `inputResponses` and `requestState` as given."""

    content: Annotated[
        list[Content],
        described("The result as text, for the model; then the artifacts it names, as links."),
    ] = msgspec.field(default_factory=list)
    structured_content: Annotated[
        BashStructured | None, described("The whole result, as structured data.")
    ] = None
    is_error: Annotated[bool, described("The command failed, timed out, or was blocked.")] = False
    details: Annotated[
        ToolDetails | None, described("Why the command was blocked, or how its output was cut.")
    ] = None
    task: Annotated[Task | None, described("The task a call with `task` created.")] = None
    input_requests: Annotated[
        dict[str, InputRequest] | None,
        described("2026-07-28: what to ask the user, by the key its answer goes under."),
    ] = None
    request_state: Annotated[
        str | None,
        described("2026-07-28: opaque, signed by the server; echoed once, before it expires."),
    ] = None

    @property
    def text(self) -> str:
        """The text the model reads: the first content, which is always text."""
        first = self.content[0]
        assert isinstance(first, TextContent)
        return first.text


class CancelledOutput(Open):
    """`data` of the -32800 error that answers a cancelled tool call."""

    output: Annotated[str, described("The output until the call was cancelled.")]


# -- resources ---------------------------------------------------------------


class Resource(Open, omit_defaults=True):
    uri: Annotated[str, described(_ARTIFACT_URI)]
    name: Annotated[str, described("A name to show for it.")]
    mime_type: Annotated[str, described(_MIME_TYPE)] = TEXT_MIME_TYPE
    size: Annotated[int | None, described("Its size in bytes.")] = None


class ResourcesListResult(Cacheable, kw_only=True):
    resources: Annotated[list[Resource], described("The artifacts of this workspace.")]


class ResourceTemplate(Open):
    uri_template: Annotated[str, described("The URI template: artifact://{id}.")]
    name: Annotated[str, described("A name to show for it.")]
    description: Annotated[str, described("What the resources are.")]
    mime_type: Annotated[str, described(_MIME_TYPE)] = TEXT_MIME_TYPE


class ResourceTemplatesListResult(Cacheable, kw_only=True):
    resource_templates: Annotated[list[ResourceTemplate], described("The templates.")]


class ResourcesReadParams(Params, kw_only=True):
    uri: Annotated[str, described(_ARTIFACT_URI)]


class ContentMeta(Open):
    truncated: Annotated[bool, described("The text holds only the artifact's start.")]
    total_bytes: Annotated[int, described("The artifact's size in bytes.")]
    next_offset: Annotated[
        int | None, described("Where artifact/read continues; null when the text is whole.")
    ]


class TextResourceContents(Open, omit_defaults=True):
    uri: Annotated[str, described(_ARTIFACT_URI)]
    mime_type: Annotated[str, described(_MIME_TYPE)]
    text: Annotated[str, described("The artifact's text (its first 8 MiB).")]
    meta: Annotated[
        ContentMeta | None, described("Present when the text is not the whole artifact.")
    ] = msgspec.field(default=None, name="_meta")


class ResourcesReadResult(Result, kw_only=True):
    contents: Annotated[list[TextResourceContents], described("The artifact's contents.")]


# -- notifications -------------------------------------------------------------


class CancelledParams(Open, omit_defaults=True):
    request_id: Annotated[RequestId, described("The request to cancel.")]
    reason: Annotated[str | None, described("Why, for the log.")] = None


class CancelRequestParams(Open):
    id: Annotated[RequestId, described("The request to cancel.")]


class ToolUpdate(Open):
    """`tool/update`: the current tail of a running tool call, as a snapshot."""

    request_id: Annotated[RequestId | None, described("The tool call's request id.")]
    content: Annotated[list[TextContent], described("The newest output, as a snapshot.")]


class ProgressParams(Open):
    progress_token: Annotated[str | int, described("The token the call's _meta gave.")]
    progress: Annotated[int, described("Bytes of output so far.")]
    message: Annotated[str, described("The last line of output, cut to 200 characters.")]


METHODS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct] | None]] = {
    "initialize": (InitializeParams, InitializeResult),
    "server/discover": (EmptyParams, DiscoverResult),
    "ping": (EmptyParams, EmptyResult),
    "tools/list": (EmptyParams, ToolsListResult),
    "tools/call": (ToolsCallParams, CallToolResult),
    "resources/list": (EmptyParams, ResourcesListResult),
    "resources/templates/list": (EmptyParams, ResourceTemplatesListResult),
    "resources/read": (ResourcesReadParams, ResourcesReadResult),
    "tasks/get": (TaskParams, Task),
    "tasks/result": (TaskParams, CallToolResult),
    "tasks/list": (EmptyParams, TasksListResult),
    "tasks/cancel": (TaskParams, Task),
    "tasks/update": (TaskUpdateParams, EmptyResult),
}

NOTIFICATIONS_FROM_CLIENT: dict[str, type[msgspec.Struct]] = {
    "notifications/initialized": EmptyParams,
    "notifications/cancelled": CancelledParams,
    "$/cancelRequest": CancelRequestParams,
}

NOTIFICATIONS_FROM_SERVER: dict[str, type[msgspec.Struct]] = {
    "tool/update": ToolUpdate,
    "notifications/progress": ProgressParams,
    TASK_STATUS: Task,
    TASK_NOTIFICATION: TaskV2,
}
