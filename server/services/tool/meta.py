"""What `tools/list` says of each tool beyond its schema, and the links a result
adds beside its text: MCP's metadata, by the revision the client speaks.

The list is in one fixed order (`bash`, `bash_output`, `bash_kill`,
`bash_input`), so a client that caches or diffs it sees no change where there
is none.
"""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    BASH_INPUT_TOOL,
    BASH_KILL_TOOL,
    BASH_OUTPUT_TOOL,
    MODERN_PROTOCOL_VERSIONS,
    CallToolResult,
    Icon,
    ResourceLink,
    Tool,
    ToolAnnotations,
    ToolExecution,
)
from bashrpc.server.errors import InvalidToolArguments
from bashrpc.server.runtime.seam.policy import UNCONFINED_MODES
from bashrpc.server.services.tool import finish, jobtools, plan
from bashrpc.server.settings import Settings

# The revisions whose content may hold a `resource_link` (added in 2025-06-18);
# an older client's schema has no such content, so it gets the text alone.
RESOURCE_LINK_REVISIONS = frozenset({"2025-06-18", "2025-11-25", *MODERN_PROTOCOL_VERSIONS})
# The revisions where bad arguments are a tool error (SEP-1303, 2025-11-25), so
# the model reads what to correct; before, a -32602 its client answers for it.
ARGUMENT_ERROR_REVISIONS = frozenset({"2025-11-25", *MODERN_PROTOCOL_VERSIONS})

_TITLES = {
    BASH_OUTPUT_TOOL: messages.BASH_OUTPUT_TOOL_TITLE,
    BASH_KILL_TOOL: messages.BASH_KILL_TOOL_TITLE,
    BASH_INPUT_TOOL: messages.BASH_INPUT_TOOL_TITLE,
}
# Reading a job's output changes nothing; stopping it ends its processes, and
# stopping it twice does no more than once; what an answer typed into it does is
# the program's (a "y" may delete), and typing it twice types it twice. None
# reaches past the job.
_JOB_ANNOTATIONS = {
    BASH_OUTPUT_TOOL: ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    BASH_KILL_TOOL: ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    BASH_INPUT_TOOL: ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    ),
}


def open_world(settings: Settings) -> bool:
    """Whether a command may reach the network: unless a confining sandbox has it
    off (an allowlist still reaches the hosts it names)."""
    sandbox = settings.sandbox
    return sandbox.mode in UNCONFINED_MODES or sandbox.net.mode != "off"


def tools(settings: Settings, icons: list[Icon] | None = None) -> list[Tool]:
    """Every tool, in the fixed order, with its title, annotations and `icons`."""
    bash = plan.tool_definition(settings)
    bash.title = messages.BASH_TOOL_TITLE
    bash.icons = icons
    # A command may write, delete and overwrite anything the sandbox lets it,
    # and running it twice may do twice as much.
    bash.annotations = ToolAnnotations(
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=False,
        open_world_hint=open_world(settings),
    )
    # A call may ask to run as a task (`tasks`): a background job polled to its end.
    bash.execution = ToolExecution(task_support="optional")
    listed = [bash]
    for name, description, schema in jobtools.definitions():
        listed.append(
            Tool(
                name=name,
                title=_TITLES[name],
                description=description,
                input_schema=schema,
                annotations=_JOB_ANNOTATIONS[name],
                icons=icons,
            )
        )
    return listed


def with_links(result: CallToolResult, revision: str | None) -> CallToolResult:
    """The result with the artifact its text names also as a `resource_link`, for
    a client whose revision has them (`revision`: the one `initialize` settled)."""
    structured = result.structured_content
    if revision not in RESOURCE_LINK_REVISIONS or structured is None:
        return result
    truncation = structured.truncation
    if structured.artifact_uri is None or truncation is None:
        return result
    link = ResourceLink(
        uri=structured.artifact_uri,
        name=messages.ARTIFACT_LINK_NAME.format(id=truncation.artifact_id),
        description=messages.ARTIFACT_LINK_DESCRIPTION,
    )
    result.content.append(link)
    return result


def argument_error(
    error: InvalidToolArguments, tool: str, revision: str | None
) -> CallToolResult | None:
    """The tool error that answers bad arguments for a client whose revision wants
    one; None: the -32602 stands."""
    if revision not in ARGUMENT_ERROR_REVISIONS:
        return None
    return finish.tool_error(messages.INVALID_TOOL_ARGUMENTS.format(tool=tool, detail=error.detail))
