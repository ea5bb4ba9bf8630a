"""The method pages open each method with a request and its reply, and those
examples cannot go stale: each page's requests, sent in order to a real server,
get replies of the shape the page shows (the same fields, and the page's reply
decodes into the method's result type)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import mcp, methods, terminals
from bashrpc.protocol.client import RESULT_TYPES
from bashrpc.protocol.envelope import ServerMessage
from bashrpc.protocol.methods import BashChunk
from tests.conftest import SpawnInProcess
from tests.daemon import DaemonProcess
from tests.docpages import Line, blocks, exchange, sections
from tests.rpc import RpcClient

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The pages whose sections are methods, each headed by the method's name.
PAGES = ("methods.md", "pty.md", "mcp-tool.md", "background-jobs.md")
# What a client may send: requests, and its own notifications (`exit`).
CLIENT_SENDS = {
    *RESULT_TYPES,
    *methods.NOTIFICATIONS_FROM_CLIENT,
    *mcp.NOTIFICATIONS_FROM_CLIENT,
    *terminals.NOTIFICATIONS_FROM_CLIENT,
}
SERVER_NOTIFIES = {
    *methods.NOTIFICATIONS_FROM_SERVER,
    *mcp.NOTIFICATIONS_FROM_SERVER,
    *terminals.NOTIFICATIONS_FROM_SERVER,
}
# A heading that names a method: "## `bash`", "## Notification `bash/chunk`".
HEADING = re.compile(r"#{2,3} (?:Notification )?`([^`]+)`")
# Directories the pages' requests name as a `cwd`, made in the workspace.
WORKSPACE_DIRS = ("frontend", "backend")
# Output the server streams for a request: what says it runs.
OUTPUT_NOTIFICATIONS = ("bash/chunk", "pty/output")


class Section(msgspec.Struct, frozen=True):
    page: str
    name: str
    example: str


def method_sections(page: str) -> list[Section]:
    """The sections headed by a method or a notification, with the block that opens
    them ("" when anything comes before it)."""
    found = []
    for heading, body in sections((DOCS / page).read_text()):
        named = HEADING.match(heading)
        if named is None or named[1] not in CLIENT_SENDS | SERVER_NOTIFIES:
            continue
        opening = blocks(body.lstrip("\n"), "json")
        example = opening[0] if opening and body.lstrip("\n").startswith("```json") else ""
        found.append(Section(page, named[1], example))
    return found


ALL = [section for page in PAGES for section in method_sections(page)]


@pytest.mark.parametrize("section", ALL, ids=lambda s: f"{s.page}:{s.name}")
def test_a_method_opens_with_its_request_and_reply(section: Section) -> None:
    lines = [line for _, line in exchange(section.example)]
    asked = [line for line in lines if line.method == section.name]
    assert asked, f"{section.page}: `{section.name}` opens with no example of it"
    if section.name in SERVER_NOTIFIES or asked[0].id is None:
        return
    replies = [line for line in lines if line.method is None and line.id == asked[0].id]
    assert replies, f"{section.page}: `{section.name}`'s example has no reply"


def test_every_method_page_is_read() -> None:
    """A method with a section on one of the pages is checked; the tables name
    them all, so a renamed heading cannot drop out silently."""
    named = {section.name for section in ALL}
    assert {"bash", "abort_bash", "artifact/read", "pty/input", "tools/call"} <= named
    assert set(terminals.METHODS) <= named


def same_shape(method: str, shown: Line, got: ServerMessage) -> None:
    if shown.error is not None:
        assert got.error is not None, (method, got)
        assert got.error.code == shown.error["code"]
        return
    assert got.error is None, (method, got.error)
    actual = msgspec.json.decode(got.result)
    kind = RESULT_TYPES[method]
    if kind is None:
        assert shown.result is None and actual is None
        return
    msgspec.convert(shown.result, kind)  # what the page shows is a valid result
    assert sorted(shown.result) == sorted(actual), method


def run(server: RpcClient, example: str) -> None:
    """Send the example's requests in order, and check each reply it shows. A
    request whose reply the page shows only later runs meanwhile: its first
    output is waited for before the next line is sent."""
    lines = exchange(example)
    sent: dict[object, str] = {}
    for index, (text, line) in enumerate(lines):
        if line.method is not None and line.method in CLIENT_SENDS:
            server.send_raw(text.encode() + b"\n")
            if line.id is None:
                continue
            sent[line.id] = line.method
            following = lines[index + 1][1] if index + 1 < len(lines) else None
            answered_next = following is not None and following.id == line.id
            if following is not None and not answered_next:
                server.wait_for(functools.partial(streams_for, ident=line.id))
        elif line.method is None:
            same_shape(sent[line.id], line, server.response(line.id))


class Streamed(msgspec.Struct, rename="camel"):
    """What output notifications have in common: the request they belong to."""

    request_id: int | str | None


def streams_for(message: ServerMessage, ident: object) -> bool:
    if message.method not in OUTPUT_NOTIFICATIONS:
        return False
    return msgspec.json.decode(message.params, type=Streamed).request_id == ident


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_requests_get_replies_of_the_shape_shown(
    spawn: SpawnInProcess, tmp_path: Path, page: str
) -> None:
    workspace = tmp_path / "project"
    for name in WORKSPACE_DIRS:
        (workspace / name).mkdir(parents=True)
    server = spawn(workspace=workspace)
    for section in method_sections(page):
        run(server, section.example)


RESUME = "### Resume: `bash/attach {requestId, afterSeq}`"


@pytest.mark.slow  # a daemon process
def test_the_resume_example_resumes_as_shown(daemon: DaemonProcess) -> None:
    """The daemon page's `bash/attach`: the first connection's lines on one
    connection, cut while its command runs, the second's on a new one."""
    text = (DOCS / "sessions-and-daemon.md").read_text()
    before, after = blocks(text.split(RESUME + "\n", 1)[1].split("\n### ", 1)[0], "json")[:2]
    first = daemon.connect()
    run(first, before)
    first.cut()
    second = daemon.connect()
    run(second, after)
    shown = [line.params for _, line in exchange(after) if line.method == "bash/chunk"]
    got = second.notified("bash/chunk", BashChunk)
    # How the rest is cut into chunks is the server's timing; where it starts and
    # what it says are the page's.
    assert got[0].seq == shown[0]["seq"]
    assert "".join(c.text for c in got) == "".join(c["text"] for c in shown)
