"""Reading the examples of a docs page: fenced blocks, sections, and the JSON-RPC
lines of an exchange, for the tests that run a page's examples as written."""

from __future__ import annotations

import re
from typing import Any

import msgspec


class Line(msgspec.Struct, omit_defaults=True):
    """A line of an exchange on a page (or from a server): a request, a
    notification or a reply, its params and result as the JSON has them."""

    jsonrpc: str
    id: int | str | None = None
    method: str | None = None
    params: Any = None
    result: Any = None
    error: Any = None


def blocks(text: str, kind: str) -> list[str]:
    """The fenced blocks of `kind` (```json, ```toml ...) in `text`, in order."""
    return re.findall(rf"^```{kind}\n(.*?)^```", text, flags=re.M | re.S)


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each `##` and `###` section, in order."""
    parts = re.split(r"^(#{2,3} .*)\n", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def exchange(block: str) -> list[tuple[str, Line]]:
    """Each line of a ```json block, as written and decoded."""
    return [(line, msgspec.json.decode(line, type=Line)) for line in block.splitlines() if line]
