"""The streamed floor: the least a server in Python does to stream output, as a
program of its own, so the bench measures it in the same run as the server.

Given a command's output on stdin, it reads it in the server's slices, keeps
every byte in a file (the artifact), and writes each slice as one `bash/chunk`
notification line on stdout (the floods it measures are ASCII, so a slice is
whole characters). Nothing else: no sanitizing, no folding of
carriage returns, no throttle, no event loop. Its first line says it is ready,
so its own start is not timed.

    python bench/streamfloor.py ARTIFACT
"""

from __future__ import annotations

import os
import sys

from bashrpc.protocol.client import ClientCore
from bashrpc.protocol.methods import BashChunk

# As the server reads a shell's output FIFO (`runtime/shell/channels.py`).
SLICE_BYTES = 64 * 1024
READY = b"ready\n"


def relay(artifact_path: str) -> None:
    core = ClientCore()
    out = sys.stdout.buffer
    out.write(READY)
    out.flush()
    with open(artifact_path, "wb", buffering=0) as artifact:
        seq = 0
        while data := os.read(0, SLICE_BYTES):
            artifact.write(data)
            text = data.decode(errors="replace")
            chunk = BashChunk(request_id=1, session_id="floor", seq=seq, text=text)
            out.write(core.notification("bash/chunk", chunk))
            out.flush()
            seq += 1


if __name__ == "__main__":
    relay(sys.argv[1])
