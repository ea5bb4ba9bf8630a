"""Run by another Python (the 1.x MCP SDK): one script at one MCP revision.

Usage: python mcp1_revisions.py SERVER_PYTHON ARTIFACTS_DIR REVISION   (stdio)
       python mcp1_revisions.py URL REVISION                           (Streamable HTTP)
The SDK asks for its latest revision; this asks for REVISION instead, which the
server answers with and the SDK accepts (over HTTP it then names it in
MCP-Protocol-Version). Then: list, a call with progress, a
cancelled call (notifications/cancelled, as the 1.x SDK does not send it), a
big output read back as a resource. Prints one JSON object of what it saw, and
what the SDK reported or logged at WARNING or above. Imports only the SDK.
"""

# Written for the 1.x SDK's API, which differs from the 2.x one mypy sees here.
# mypy: ignore-errors

from __future__ import annotations

import json
import logging
import sys
import traceback
from typing import Any

import anyio
import mcp.types
from mcp import ClientSession
from mcp1kit import Collect, give_up, http_session_to, session_to


async def script(session: ClientSession, report: dict[str, Any]) -> None:
    report["version"] = (await session.initialize()).protocolVersion
    report["tools"] = [tool.name for tool in (await session.list_tools()).tools]
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    called = await session.call_tool(
        "bash", {"command": "echo one; sleep 0.3; echo two"}, progress_callback=on_progress
    )
    report["text"], report["progress"] = called.content[0].text, len(progress)
    await give_up(session, cancel=True)
    report["next"] = (await session.call_tool("bash", {"command": "echo healthy"})).content[0].text
    big = await session.call_tool("bash", {"command": "seq 1 100000"})
    report["content_types"] = [content.type for content in big.content]
    uri = big.structuredContent["artifactUri"]
    read = await session.read_resource(uri)
    report["read_length"] = len(read.contents[0].text)
    listed = await session.list_resources()
    report["listed"] = uri in {str(resource.uri) for resource in listed.resources}


async def main(server: list[str], report: dict[str, Any]) -> None:
    """`server`: a URL, or the server's Python and its artifacts folder."""
    connected = (
        http_session_to(server[0], report) if len(server) == 1 else session_to(*server, report)
    )
    async with connected as session:
        await script(session, report)
        await session.send_ping()


if __name__ == "__main__":
    *server, revision = sys.argv[1:]
    # What initialize asks for: read when it is sent.
    mcp.types.LATEST_PROTOCOL_VERSION = revision
    collect = Collect()
    logging.getLogger().addHandler(collect)
    report: dict[str, Any] = {"raised": None, "errors": []}
    try:
        anyio.run(main, server, report)
    except BaseException as exc:
        report["raised"] = "".join(traceback.format_exception(exc))
    report["log"] = collect.lines
    print(json.dumps(report))
