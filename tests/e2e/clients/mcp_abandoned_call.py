"""Run by another Python (an MCP SDK of another major version): give up on a call.

Usage: python mcp_abandoned_call.py SERVER_PYTHON ARTIFACTS_DIR [cancel]
A tool call is started and seen running (its first progress). Without `cancel`
it is abandoned without a cancel notification, as the 1.x SDK does when its
caller gives up; then the session and the transport close, which closes the
server's stdin. With `cancel` it is cancelled with `notifications/cancelled`
(which the 1.x SDK leaves to its caller to send), and another call follows.
Prints one JSON object: what the session raised (null when nothing did),
whether a ping was still answered, the errors the SDK reported (a response to
an unknown request id is one) and the next call's text. Imports only the SDK,
never bashrpc.
"""

# Written for the 1.x SDK's API, which differs from the 2.x one mypy sees here.
# mypy: ignore-errors

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

import anyio
from mcp1kit import give_up, session_to


async def main(server_python: str, artifacts: str, cancel: bool, report: dict[str, Any]) -> None:
    async with session_to(server_python, artifacts, report) as session:
        await session.initialize()
        await give_up(session, cancel)
        if cancel:
            again = await session.call_tool("bash", {"command": "echo still healthy"})
            report["next"] = again.content[0].text
        report["pinged"] = await session.send_ping() is not None


if __name__ == "__main__":
    report: dict[str, Any] = {"raised": None, "pinged": False, "errors": [], "next": None}
    try:
        anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:] == ["cancel"], report)
    except BaseException as exc:
        report["raised"] = "".join(traceback.format_exception(exc))
    print(json.dumps(report))
