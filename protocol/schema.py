"""JSON Schema documents generated from the wire types (pure: returns bytes).

One document per method and per notification. Each describes the message's
``params`` and, for methods, its ``result``, with shared types under ``$defs``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from protocol import methods

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _file_name(kind: str, name: str) -> str:
    return f"{kind}/{name.replace('/', '.')}.json"


def _document(
    title: str, params: type[msgspec.Struct], result: type[msgspec.Struct] | None
) -> dict[str, Any]:
    types: list[Any] = [params] if result is None else [params, result]
    refs, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    properties: dict[str, Any] = {"params": refs[0]}
    if result is None:
        properties["result"] = {"type": "null"}
    else:
        properties["result"] = refs[1]
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
    for name, (params, result) in methods.METHODS.items():
        docs[_file_name("methods", name)] = _document(name, params, result)
    for name, params in methods.NOTIFICATIONS_FROM_CLIENT.items():
        docs[_file_name("notifications", name)] = _document(name, params, None)
    for name, payload in methods.NOTIFICATIONS_FROM_SERVER.items():
        doc = _document(name, payload, None)
        del doc["properties"]["result"]
        docs[_file_name("notifications", name)] = doc
    return {
        path: (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
        for path, doc in sorted(docs.items())
    }
