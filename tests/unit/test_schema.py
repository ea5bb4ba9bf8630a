"""The generated JSON Schemas: every field says what it is, where clients show it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from bashrpc.protocol.mcp import BashStructured, BashToolArguments
from bashrpc.protocol.schema import generate, inline_schema, transcript_documents


def undescribed(node: Any, where: str) -> Iterator[str]:
    """Where, anywhere in a schema, a property has no description."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
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
    schema = {"properties": {"a": {"type": "string", "description": "x"}, "b": {"type": "int"}}}
    assert list(undescribed({"$defs": {"T": schema}}, "doc")) == ["doc/$defs/T.b"]
