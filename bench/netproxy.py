"""The allowlist's proxy alone, for the network bench: `python bench/netproxy.py
ORIGIN_PORT` serves the proxy on a loopback port (printed) that allows
`origin.example.org`, presented at a global address and dialled on loopback at
ORIGIN_PORT: the proxy's own code, without a sandbox around the client."""

from __future__ import annotations

import sys

import anyio
import anyio.abc

from bashrpc.server.runtime.network import proxy, resolver
from bashrpc.server.runtime.seam.egress import Egress

NAME = "origin.example.org"
PRESENTED = "93.184.216.34"


async def main(origin_port: int) -> None:
    mapping = resolver.MappedResolver(
        {NAME: PRESENTED}, {(PRESENTED, 80): ("127.0.0.1", origin_port)}
    )
    context = proxy.Context(Egress(allow=(NAME,)), mapping, 60.0)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    print(listener.extra(anyio.abc.SocketAttribute.local_port), flush=True)

    async def serve(client: anyio.abc.SocketStream) -> None:
        await proxy.serve(
            client, context, lambda r: None if r.allowed else print(r, file=sys.stderr)
        )

    await listener.serve(serve)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]), backend_options={"use_uvloop": True})
