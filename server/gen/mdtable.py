"""Markdown pieces for the generated reference: table cells, tables, anchors."""

from __future__ import annotations

import re


def cell(text: str) -> str:
    """Text as one table cell: on one line, its pipes escaped outside code spans."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A table's lines, then a blank one."""
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def anchor(kind: str, name: str) -> str:
    """A stable heading id: `type` and `BashResult` give `type-bashresult`."""
    return "-".join(filter(None, [kind, re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")]))
