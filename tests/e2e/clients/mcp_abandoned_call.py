"""Run by another Python (an MCP SDK of another major version): abandon a call, then close.

Usage: python mcp_abandoned_call.py SERVER_PYTHON ARTIFACTS_DIR
A tool call is started, seen running (its first progress), and abandoned
without a cancel notification, as the 1.x SDK does when its caller gives up;
then the session and the transport close, which closes the server's stdin.
Prints one JSON object: what closing raised (null when nothing did), and
whether the session still answered a ping after the call was abandoned.
Imports only the SDK, never bashrpc.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

LONG_COMMAND = "echo started; sleep 60"
HANG_SECONDS = 30


async def main(server_python: str, artifacts: str) -> bool:
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
                started = anyio.Event()

                # Named as the SDK's progress callback protocol names them.
                async def progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    started.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        lambda: session.call_tool(
                            "bash", {"command": LONG_COMMAND}, progress_callback=progress
                        )
                    )
                    await started.wait()
                    tg.cancel_scope.cancel()
                return await session.send_ping() is not None


if __name__ == "__main__":
    error: str | None = None
    pinged = False
    try:
        pinged = anyio.run(main, sys.argv[1], sys.argv[2])
    except BaseException as exc:
        error = "".join(traceback.format_exception(exc))
    print(json.dumps({"error": error, "pinged": pinged}))
