"""JSON Schema documents generated from the wire types (pure: returns bytes).

One document per method and per notification. Each describes the message's
``params`` and, for methods, its ``result``, with shared types under ``$defs``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from bashrpc.protocol import mcp, methods, terminals, transcript

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Every property of every document has a description, these two included.
PARAMS_DESCRIPTION = "The message's params."
RESULT_DESCRIPTION = "The method's result."
NULL_RESULT_DESCRIPTION = "The method answers null."
# The `type` that tells a tagged union's members apart (MCP content).
CONTENT_TAG_DESCRIPTION = "The kind of content."


def inline_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """A Struct's schema with the object itself at the top, as MCP tool schemas must be."""
    refs, defs = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    name = refs[0]["$ref"].rsplit("/", 1)[1]
    top: dict[str, Any] = dict(defs.pop(name))
    if defs:
        top["$defs"] = defs
    return top


def _describe_tags(defs: dict[str, Any], description: str) -> None:
    """A tag field has no annotation to carry its description: it is given one here."""
    for definition in defs.values():
        tag = definition.get("properties", {}).get("type")
        if tag is not None and "description" not in tag:
            tag["description"] = description


def file_name(kind: str, name: str) -> str:
    """`session/open` -> `methods/session.open.json`; `$/x` -> `_.x`: shell-safe names."""
    return f"{kind}/{re.sub(r'[^A-Za-z0-9_.-]', '_', name.replace('/', '.'))}.json"


def _document(
    title: str, params: type[msgspec.Struct], result: type[msgspec.Struct] | None
) -> dict[str, Any]:
    """Methods without a result (shutdown) answer null."""
    types: list[Any] = [params] if result is None else [params, result]
    refs, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    _describe_tags(defs, CONTENT_TAG_DESCRIPTION)
    properties: dict[str, Any] = {"params": {**refs[0], "description": PARAMS_DESCRIPTION}}
    if result is None:
        properties["result"] = {"type": "null", "description": NULL_RESULT_DESCRIPTION}
    else:
        properties["result"] = {**refs[1], "description": RESULT_DESCRIPTION}
    return {
        "$schema": SCHEMA_DIALECT,
        "title": title,
        "type": "object",
        "properties": properties,
        "$defs": defs,
    }


def generate() -> dict[str, bytes]:
    """Relative file name -> file content, deterministic."""
    docs: dict[str, dict[str, Any]] = {}
    for table in (methods.METHODS, mcp.METHODS, terminals.METHODS):
        for name, (params, result) in table.items():
            docs[file_name("methods", name)] = _document(name, params, result)
    for notifications in (
        methods.NOTIFICATIONS_FROM_CLIENT,
        methods.NOTIFICATIONS_FROM_SERVER,
        mcp.NOTIFICATIONS_FROM_CLIENT,
        mcp.NOTIFICATIONS_FROM_SERVER,
        terminals.NOTIFICATIONS_FROM_CLIENT,
        terminals.NOTIFICATIONS_FROM_SERVER,
    ):
        for name, payload in notifications.items():
            doc = _document(name, payload, None)
            del doc["properties"]["result"]
            docs[file_name("notifications", name)] = doc
    return {
        path: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        for path, doc in sorted(docs.items())
    }


TRANSCRIPT_SCHEMA = "transcript/line.json"
TAG_DESCRIPTION = "What the line is: the header, or a message from the client or the server."
TRANSCRIPT_TITLE = "A line of a bashrpc transcript (JSON Lines): the header, or one message"


def transcript_documents() -> dict[str, bytes]:
    """The schema of a transcript's lines, any of which validates against it."""
    refs, defs = msgspec.json.schema_components([transcript.Line], ref_template="#/$defs/{name}")
    _describe_tags(defs, TAG_DESCRIPTION)
    doc = {"$schema": SCHEMA_DIALECT, "title": TRANSCRIPT_TITLE, **refs[0], "$defs": defs}
    return {TRANSCRIPT_SCHEMA: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()}
