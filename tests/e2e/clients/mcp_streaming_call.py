"""Run by another Python (an MCP SDK of another major version): one streaming call.

Usage: python mcp_streaming_call.py SERVER_PYTHON ARTIFACTS_DIR
Prints one JSON object: the tool's text, and every log record the SDK wrote
at WARNING or above. Imports only the SDK, never bashrpc.
"""

from __future__ import annotations

import json
import logging
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

STREAMING_COMMAND = "for i in $(seq 10); do echo line-$i; sleep 0.1; done"
HANG_SECONDS = 30


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def main(server_python: str, artifacts: str, collect: Collect) -> str:
    params = StdioServerParameters(
        command=server_python,
        args=["-m", "bashrpc", "--artifacts-dir", artifacts],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/")},
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as streams,
            ClientSession(*streams) as session,
        ):
            with anyio.fail_after(HANG_SECONDS):
                await session.initialize()
                result = await session.call_tool("bash", {"command": STREAMING_COMMAND})
                content = result.content[0]
                assert isinstance(content, TextContent), content
                return content.text


if __name__ == "__main__":
    collect = Collect()
    logging.getLogger().addHandler(collect)
    logging.getLogger().setLevel(logging.WARNING)
    text = anyio.run(main, sys.argv[1], sys.argv[2], collect)
    print(json.dumps({"text": text, "log": collect.lines}))
