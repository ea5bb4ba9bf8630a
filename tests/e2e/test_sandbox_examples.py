"""The sandbox page's examples, run as written: each example's settings on a real
`bashrpc`, as root and as uid 65534 with real bwrap and git, answer the page's
requests with the page's replies."""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec
import pytest

from tests.docpages import Line, blocks, sections
from tests.githost import Host, host
from tests.sandboxing import skip_without_sandbox

__all__ = ["host"]

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"
# The home the page's paths are under; each run's own base stands in for it.
PAGE_HOME = "/home/me"
# Byte counts of an output count its paths, which are longer here than on the page.
PATH_DEPENDENT = ("totalBytes", "outputBytes")


class Example(msgspec.Struct, frozen=True):
    title: str
    settings: str
    lines: tuple[str, ...]


def examples() -> list[Example]:
    section = PAGE.read_text().split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    found = []
    for heading, body in sections(section):
        settings, exchange = blocks(body, "toml"), blocks(body, "json")
        if settings and exchange:
            lines = tuple(line for line in exchange[0].splitlines() if line)
            found.append(Example(heading.removeprefix("### "), settings[0], lines))
    return found


def comparable(line: str, base: str) -> Line:
    decoded = msgspec.json.decode(line.replace(base, PAGE_HOME), type=Line)
    if isinstance(decoded.result, dict):
        for field in PATH_DEPENDENT:
            decoded.result.pop(field, None)
    return decoded


def test_the_page_has_an_example_per_mode() -> None:
    modes = {tomllib.loads(e.settings)["sandbox"]["mode"] for e in examples()}
    assert modes == {"off", "full", "workspace-write", "read-only"}


@pytest.mark.parametrize("example", examples(), ids=lambda e: e.title)
def test_an_example_answers_as_the_page_shows(host: Host, example: Example) -> None:
    skip_without_sandbox()
    base = str(host.base)
    workspace = host.repo("project")
    host.repo("monorepo")
    host.write(host.base / "monorepo" / "web" / "index.html", "")
    host.write(host.base / "cache" / ".keep", "")
    table = tomllib.loads(example.settings)["sandbox"]
    rest = example.settings.replace(PAGE_HOME, base).split("\n", 2)[2]
    server = host.serve(workspace, table["mode"], rest)
    requests, replies = example.lines[0::2], example.lines[1::2]
    assert len(requests) == len(replies) > 0
    for request, expected in zip(requests, replies, strict=True):
        ident = msgspec.json.decode(request, type=Line).id
        server.send_raw(request.replace(PAGE_HOME, base).encode() + b"\n")
        server.response(ident)
        (got,) = [
            raw
            for raw in server.raw_lines
            if (line := msgspec.json.decode(raw, type=Line)).id == ident and line.method is None
        ]
        assert comparable(got.decode(), base) == comparable(expected, base)
        server.raw_lines.clear()
