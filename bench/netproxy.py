"""The allowlist's proxy alone, for the network bench: `python bench/netproxy.py
ORIGIN_PORT` serves the proxy on a loopback port (printed) that allows
`origin.example.org`, presented at a global address and dialled on loopback at
ORIGIN_PORT: the proxy's own code, without a sandbox around the client."""

from __future__ import annotations

import socket
import sys

import anyio

from bashrpc.server.runtime.network import proxy, rawsocket, resolver
from bashrpc.server.runtime.seam.egress import Egress

NAME = "origin.example.org"
PRESENTED = "93.184.216.34"


async def main(origin_port: int) -> None:
    mapping = resolver.MappedResolver(
        {NAME: PRESENTED}, {(PRESENTED, 80): ("127.0.0.1", origin_port)}
    )
    context = proxy.Context(Egress(allow=(NAME,)), mapping, 60.0)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    print(listener.getsockname()[1], flush=True)
    async with anyio.create_task_group() as group:
        while True:
            client = await rawsocket.accept(listener)
            connection = proxy.Connection(client, context.idle_seconds)
            group.start_soon(proxy.serve, connection, context, _refused)


def _refused(record: proxy.Record) -> None:
    if not record.allowed:
        print(record, file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]), backend_options={"use_uvloop": True})
