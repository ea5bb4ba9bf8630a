"""The least a relay can do, for the network bench's floor: `python
bench/relayfloor.py ORIGIN_PORT` relays each connection on a loopback port
(printed) to the origin, with blocking `splice(2)` in a thread each way (no
parsing, no policy, no event loop). What the proxy's download is measured
against: a proxied byte crosses a second TCP connection on loopback, which no
relay avoids."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import threading

SPLICE_BYTES = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def pump(source: socket.socket, sink: socket.socket) -> None:
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(write_end, F_SETPIPE_SZ, SPLICE_BYTES)
    try:
        while count := os.splice(source.fileno(), write_end, SPLICE_BYTES):
            while count:
                count -= os.splice(read_end, sink.fileno(), count)
    except OSError:
        pass
    finally:
        os.close(read_end)
        os.close(write_end)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, origin_port: int) -> None:
    with client, socket.create_connection(("127.0.0.1", origin_port)) as upstream:
        down = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        down.start()
        pump(client, upstream)
        down.join()


def main(origin_port: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=relay, args=(client, origin_port), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]))
