"""The generated JSON Schemas: every field says what it is, where clients show it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bashrpc.protocol.mcp import BashStructured, BashToolArguments
from bashrpc.protocol.schema import generate, inline_schema, transcript_documents


def undescribed(node: Any, where: str) -> Iterator[str]:
    """Where, anywhere in a schema, a property has no description (an object's:
    a property may itself be named `properties`, as an elicitation's form has)."""
    if isinstance(node, dict):
        properties = node.get("properties") if node.get("type") == "object" else None
        for name, prop in (properties or {}).items():
            if not isinstance(prop, dict) or not prop.get("description"):
                yield f"{where}.{name}"
        for key, child in node.items():
            yield from undescribed(child, f"{where}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from undescribed(child, f"{where}[{index}]")


def test_every_field_of_every_schema_has_a_description() -> None:
    generated = {**generate(), **transcript_documents()}
    documents = {name: json.loads(content) for name, content in generated.items()}
    documents["tool bash: inputSchema"] = inline_schema(BashToolArguments)
    documents["tool bash: outputSchema"] = inline_schema(BashStructured)
    missing = [path for name, doc in documents.items() for path in undescribed(doc, name)]
    assert missing == []


def test_the_check_sees_a_missing_description() -> None:
    fields = {"a": {"type": "string", "description": "x"}, "b": {"type": "int"}}
    schema = {"type": "object", "properties": fields}
    assert list(undescribed({"$defs": {"T": schema}}, "doc")) == ["doc/$defs/T.b"]
    # A described property named `properties` is a property like any other.
    form = {"type": "object", "properties": {"properties": {"type": "object", "description": "x"}}}
    assert list(undescribed(form, "doc")) == []
