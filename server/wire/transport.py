"""The seam between a connection and its bytes.

A connection reads from a byte receive stream and writes to a byte send
stream; it does not know what is behind them. `stdio.py` supplies streams
over the process's file descriptors; `memory_pair()` supplies two ends of
an in-memory pipe, which is how tests talk to a real server in-process.
"""

from __future__ import annotations

import anyio
import msgspec
from anyio.abc import AnyByteReceiveStream, AnyByteSendStream

# Unread bytes an in-memory end holds before its writer waits, as a pipe would.
MEMORY_PIPE_CHUNKS = 256


class Transport(msgspec.Struct, frozen=True):
    receive: AnyByteReceiveStream
    send: AnyByteSendStream
    # Its output is the process's stdout, whose loss ends the process (worth a
    # warning); a daemon's client going away is no news.
    is_stdout: bool = False
    # The tenant the connection belongs to before any `initialize` (a daemon's
    # key): a Streamable HTTP exchange outside a session is its principal's.
    owner: str | None = None


def memory_pair() -> tuple[Transport, Transport]:
    """(server end, client end) of an in-memory, bounded, bidirectional pipe."""
    to_server_send, to_server_receive = anyio.create_memory_object_stream[bytes](MEMORY_PIPE_CHUNKS)
    to_client_send, to_client_receive = anyio.create_memory_object_stream[bytes](MEMORY_PIPE_CHUNKS)
    return Transport(to_server_receive, to_client_send), Transport(
        to_client_receive, to_server_send
    )
