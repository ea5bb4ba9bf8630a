"""The requests an MCP host sends, built from the protocol's Structs: the
handshake, and a call of the bash tool, whose arguments travel as raw JSON
(the server decodes them strictly into the tool's own type)."""

from __future__ import annotations

import msgspec

from bashrpc.protocol.mcp import (
    BASH_TOOL,
    LATEST_PROTOCOL_VERSION,
    BashToolArguments,
    ClientCapabilities,
    HostOptions,
    Implementation,
    InitializeParams,
    RequestMeta,
    ToolsCallParams,
)

__all__ = ["bash_tool_call", "initialize_params"]


def initialize_params(
    options: HostOptions | None = None,
    *,
    version: str = LATEST_PROTOCOL_VERSION,
    client: Implementation | None = None,
    capabilities: ClientCapabilities | None = None,
) -> InitializeParams:
    """`initialize`'s params: the revision spoken, and what the host tells bashrpc."""
    return InitializeParams(
        protocol_version=version,
        capabilities=capabilities or ClientCapabilities(),
        client_info=client,
        initialization_options=options,
    )


def bash_tool_call(
    arguments: BashToolArguments, progress_token: str | int | None = None
) -> ToolsCallParams:
    """`tools/call` of the bash tool; a progress token asks for notifications/progress."""
    meta = None if progress_token is None else RequestMeta(progress_token=progress_token)
    return ToolsCallParams(
        name=BASH_TOOL, arguments=msgspec.Raw(msgspec.json.encode(arguments)), meta=meta
    )
