"""One request's flood does not stand between another request and its reply.

Measured in bytes, not seconds: how much of the flood the client reads, once it
reads again, before the answer to a `true` sent while it did not. Behind a
flood's backlog that is the whole outbox and the pipe; served fairly it is the
pipe's content and a slice.
The timing figures are the fairness benchmark's (`python -m bench --only fairness`).
"""

from __future__ import annotations

import time
from pathlib import Path

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashParams
from bashrpc.server.wire.outbox import OUTBOX_MAX_BYTES
from bashrpc.server.wire.stdio import PIPE_BUFFER_BYTES
from tests.rpc import DEFAULT_TIMEOUT, ServerProcess, wait_until

FLOOD = "head -c 2000M /dev/zero | tr '\\0' x | fold -w 100"
TRIES = 3
# What may stand between a request and its reply: what the server already wrote to
# stdout's pipe, and a fraction of the outbox (a write under way and a slice of the
# flood). Behind the flood's backlog it would be the pipe and the whole outbox.
FAIR_BYTES_BOUND = PIPE_BUFFER_BYTES + OUTBOX_MAX_BYTES // 4
# Long enough for the server to fill its outbox and the pipe while no one reads, and
# for a `true` to run, so its reply waits among the flood's and no byte count
# depends on how fast anything ran.
FILL_SECONDS = 1.0


class CountingServer(ServerProcess):
    """Remembers how many bytes it had read when each reply came."""

    def __init__(self, *args: str, tmp: Path) -> None:
        self.bytes_read = 0
        self.read_at_reply: dict[RequestId, int] = {}
        super().__init__(*args, tmp=tmp)
        self.keep_chunks = False

    def _received(self, line: bytes) -> None:
        self.bytes_read += len(line)
        if line.startswith(b'{"jsonrpc":"2.0","id":'):
            ident = int(line[len(b'{"jsonrpc":"2.0","id":') :].split(b",", 1)[0])
            self.read_at_reply[ident] = self.bytes_read
        super()._received(line)


def test_a_reply_overtakes_another_requests_backlog(tmp_path: Path) -> None:
    server = CountingServer(tmp=tmp_path)
    try:
        assert server.bash("true", session_id="a").exit_code == 0
        flood = server.request("bash", BashParams(command=FLOOD, session_id="b"))
        assert wait_until(lambda: server.chunks_dropped > 0)
        behind = []
        for _ in range(TRIES):
            server.pause_reading()
            time.sleep(FILL_SECONDS)
            before = server.bytes_read
            ident = server.request("bash", BashParams(command="true", session_id="a"))
            time.sleep(FILL_SECONDS)  # `true` has run: its reply waits in the outbox
            server.resume_reading()
            assert server.bash_result(ident).exit_code == 0
            behind.append(server.read_at_reply[ident] - before)
        assert max(behind) < FAIR_BYTES_BOUND, behind
        assert server.abort(request_id=flood)
        server.response(flood, timeout=DEFAULT_TIMEOUT)
    finally:
        server.close()
