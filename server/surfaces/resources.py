"""Artifacts as MCP resources: `artifact://N`."""

from __future__ import annotations

import re

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
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
from bashrpc.protocol.methods import ARTIFACT_ID_MAX_DIGITS
from bashrpc.server import errors
from bashrpc.server.connection import RequestContext
from bashrpc.server.services.api import Services
from bashrpc.server.wire.registry import Registry

# One read returns at most this much; `_meta.nextOffset` points artifact/read at the rest.
RESOURCE_READ_MAX_BYTES = 8 * 1024 * 1024
_NUMERIC_ID = re.compile(r"[0-9]+")

# An MCP client that closed our stdin reads nothing more (see Registry).
methods = Registry(answers_after_eof=False)
# What a handler gets: the connection and these services, typed.
Ctx = RequestContext[Services]


def parse_artifact_uri(uri: str) -> str:
    """The digits of the id in `artifact://N`; anything else is -32602 with a precise reason."""
    if not uri.startswith(ARTIFACT_URI_SCHEME):
        raise _invalid(messages.UNSUPPORTED_URI.format(uri=uri))
    rest = uri[len(ARTIFACT_URI_SCHEME) :]
    if not rest:
        raise _invalid(messages.ARTIFACT_URI_NO_ID)
    if _NUMERIC_ID.fullmatch(rest) is None:
        raise _invalid(messages.ARTIFACT_URI_NOT_NUMERIC.format(got=rest))
    return rest


def _invalid(reason: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(reason, message=reason)


@methods.method("resources/list")
def resources_list(ctx: Ctx, params: EmptyParams) -> ResourcesListResult:
    resources = [
        Resource(
            uri=f"{ARTIFACT_URI_SCHEME}{artifact_id}", name=f"artifact {artifact_id}", size=size
        )
        for artifact_id, size in ctx.services.artifacts.sizes()
    ]
    return ResourcesListResult(resources=resources)


@methods.method("resources/templates/list")
def templates_list(ctx: Ctx, params: EmptyParams) -> ResourceTemplatesListResult:
    return ResourceTemplatesListResult(
        resource_templates=[
            ResourceTemplate(
                uri_template=ARTIFACT_URI_TEMPLATE,
                name="artifact",
                description="The full output of a command whose result was truncated.",
            )
        ]
    )


@methods.method("resources/read")
def resources_read(ctx: Ctx, params: ResourcesReadParams) -> ResourcesReadResult:
    digits = parse_artifact_uri(params.uri)
    store = ctx.services.artifacts
    if len(digits.lstrip("0")) > ARTIFACT_ID_MAX_DIGITS:
        # Kept as text: no such id exists, and int() refuses numbers this long.
        raise errors.ArtifactNotFound(digits, store.ids(), params.uri)
    try:
        chunk = store.read(int(digits), 0, RESOURCE_READ_MAX_BYTES)
    except errors.ArtifactNotFound as exc:
        raise errors.ArtifactNotFound(exc.artifact_id, exc.available, params.uri) from None
    meta = None
    if chunk.next_offset is not None:
        meta = ContentMeta(
            truncated=True, total_bytes=chunk.total_bytes, next_offset=chunk.next_offset
        )
    return ResourcesReadResult(
        contents=[
            TextResourceContents(
                uri=params.uri,
                mime_type=TEXT_MIME_TYPE,
                text=chunk.data.decode("utf-8", "replace"),
                meta=meta,
            )
        ]
    )
