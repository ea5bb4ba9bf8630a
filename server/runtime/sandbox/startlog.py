"""What bwrap says on its stderr, kept to explain a sandbox that would not start.

bwrap's stderr (a sandboxed shell's, or a PTY command's, whose `bash -c` puts
its own stderr back on the terminal first) is a pipe read to its end here, so
nothing that writes to it ever blocks; only the first few KiB are kept, and of
those only bwrap's own lines (`bwrap: ...`) count. When the shell or command
dies and bwrap said something, that is the reason: the call fails with -32006
and that text, instead of passing for a command that ran and failed.

bwrap speaks before it runs the shell, never after; the command may write
there (the shell's stderr as bash saved it, bwrap's own through /proc). So
the shell's first act is to write HANDED_OVER, which no message of bwrap's
holds, and let go of the log: only what came before it is bwrap's.
"""

from __future__ import annotations

import os

import anyio

from bashrpc.server import fdio

# bwrap prefixes every message of its own with this.
BWRAP_PREFIX = "bwrap: "
# What the shell writes first: whatever follows is not bwrap's.
HANDED_OVER = b"\0"
KEPT_BYTES = 4096
READ_BYTES = 4096
# How long bwrap's last words are awaited once the shell is gone.
EOF_WAIT_SECONDS = 1.0


class StartLog:
    def __init__(self) -> None:
        self._read, self.write_end = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(self._read, False)
        self._kept = bytearray()
        self._handed_over = False
        self._ended = anyio.Event()

    def started(self) -> None:
        """The child has its copy: the server's write end goes."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def close(self) -> None:
        """For a log whose `collect` will never run (its child did not start)."""
        self.started()
        if not self._ended.is_set():
            self._ended.set()
            os.close(self._read)

    async def collect(self) -> None:
        """Read to EOF (every holder gone), keeping the start; the owner cancels it."""
        try:
            while data := await fdio.read(self._read, READ_BYTES):
                if self._handed_over:
                    continue
                bwraps, marker, _ = data.partition(HANDED_OVER)
                self._kept += bwraps[: KEPT_BYTES - len(self._kept)]
                self._handed_over = bool(marker)
        finally:
            self.started()
            if not self._ended.is_set():
                self._ended.set()
                anyio.notify_closing(self._read)
                os.close(self._read)

    async def bwrap_message(self) -> str | None:
        """bwrap's own lines, once it has exited; None when it said nothing before
        the shell ran."""
        with anyio.move_on_after(EOF_WAIT_SECONDS):
            await self._ended.wait()
        text = self._kept.decode(errors="replace")
        lines = [line for line in text.splitlines() if line.startswith(BWRAP_PREFIX)]
        return "\n".join(lines) or None
