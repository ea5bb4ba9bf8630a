"""Run by another Python (an MCP SDK of another major version): one streaming call.

Usage: python mcp_streaming_call.py SERVER_PYTHON ARTIFACTS_DIR
Prints one JSON object: the tool's text, and every log record the SDK wrote
at WARNING or above. Imports only the SDK, never bashrpc.
"""

from __future__ import annotations

import json
import logging
import sys

import anyio
from mcp.types import TextContent
from mcp1kit import Collect, session_to  # type: ignore[import-not-found]

STREAMING_COMMAND = "for i in $(seq 10); do echo line-$i; sleep 0.1; done"


async def main(server_python: str, artifacts: str) -> str:
    async with session_to(server_python, artifacts) as session:
        await session.initialize()
        result = await session.call_tool("bash", {"command": STREAMING_COMMAND})
        content = result.content[0]
        assert isinstance(content, TextContent), content
        return content.text


if __name__ == "__main__":
    collect = Collect()
    logging.getLogger().addHandler(collect)
    logging.getLogger().setLevel(logging.WARNING)
    text = anyio.run(main, sys.argv[1], sys.argv[2])
    print(json.dumps({"text": text, "log": collect.lines}))
