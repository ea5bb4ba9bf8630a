"""Artifacts as MCP resources: `artifact://N`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol import messages
from protocol.envelope import Call
from protocol.errors import ErrorCode
from protocol.mcp import (
    ARTIFACT_URI_SCHEME,
    ARTIFACT_URI_TEMPLATE,
    TEXT_MIME_TYPE,
    ContentMeta,
    EmptyParams,
    Resource,
    ResourcesListResult,
    ResourcesReadParams,
    ResourcesReadResult,
    ResourceTemplate,
    ResourceTemplatesListResult,
    TextResourceContents,
)
from server.artifacts import ArtifactNotFound
from server.dispatch import RpcError

if TYPE_CHECKING:
    from server.app import Server

# One read returns at most this much; `_meta.nextOffset` points artifact/read at the rest.
RESOURCE_READ_MAX_BYTES = 8 * 1024 * 1024
_NUMERIC_ID = re.compile(r"[0-9]{1,18}")


def parse_artifact_uri(uri: str) -> int:
    """The id in `artifact://N`; anything else is -32602 with a precise reason."""
    if not uri.startswith(ARTIFACT_URI_SCHEME):
        raise _invalid(messages.UNSUPPORTED_URI.format(uri=uri))
    rest = uri[len(ARTIFACT_URI_SCHEME) :]
    if not rest:
        raise _invalid(messages.ARTIFACT_URI_NO_ID)
    if _NUMERIC_ID.fullmatch(rest) is None:
        raise _invalid(messages.ARTIFACT_URI_NOT_NUMERIC.format(got=rest))
    return int(rest)


def _invalid(reason: str) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, reason, reason)


def register(server: Server) -> None:
    async def resources_list(call: Call, p: EmptyParams) -> ResourcesListResult:
        store = server.artifacts
        resources = []
        for artifact_id, size in store.sizes():
            resources.append(
                Resource(
                    uri=f"{ARTIFACT_URI_SCHEME}{artifact_id}",
                    name=f"artifact {artifact_id}",
                    size=size,
                )
            )
        return ResourcesListResult(resources=resources)

    async def templates_list(call: Call, p: EmptyParams) -> ResourceTemplatesListResult:
        return ResourceTemplatesListResult(
            resource_templates=[
                ResourceTemplate(
                    uri_template=ARTIFACT_URI_TEMPLATE,
                    name="artifact",
                    description="The full output of a command whose result was truncated.",
                )
            ]
        )

    async def resources_read(call: Call, p: ResourcesReadParams) -> ResourcesReadResult:
        artifact_id = parse_artifact_uri(p.uri)
        try:
            chunk = server.artifacts.read(artifact_id, 0, RESOURCE_READ_MAX_BYTES)
        except ArtifactNotFound as exc:
            raise RpcError(
                ErrorCode.ARTIFACT_NOT_FOUND,
                messages.artifact_not_found(exc.artifact_id, exc.available),
                {"uri": p.uri, "available": exc.available},
            ) from None
        meta = None
        if chunk.next_offset is not None:
            meta = ContentMeta(
                truncated=True, total_bytes=chunk.total_bytes, next_offset=chunk.next_offset
            )
        return ResourcesReadResult(
            contents=[
                TextResourceContents(
                    uri=p.uri,
                    mime_type=TEXT_MIME_TYPE,
                    text=chunk.data.decode("utf-8", "replace"),
                    meta=meta,
                )
            ]
        )

    server.add_method("resources/list", EmptyParams, resources_list)
    server.add_method("resources/templates/list", EmptyParams, templates_list)
    server.add_method("resources/read", ResourcesReadParams, resources_read)
