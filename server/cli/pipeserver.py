"""A server child over its pipes, for the blocking tools that drive one line by
line: replay and the pytest plugin. Lines are read on a thread of its own and
kept in order; a caller waits on a condition over what has arrived."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

# How much of the server's output one read takes.
READ_BYTES = 1024 * 1024
# How long a server may take to exit once its stdin is closed.
EXIT_SECONDS = 10.0


class PipeServer:
    """`argv` started with pipes on stdin and stdout; stderr goes to `stderr`."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | os.PathLike[str],
        stderr: IO[bytes] | int | None = None,
        on_line: Callable[[bytes], None] | None = None,
    ) -> None:
        self.lines: list[bytes] = []
        self.ended = False
        self._changed = threading.Condition()
        self._on_line = on_line
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self._writing = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        pending = b""
        try:
            while data := os.read(stdout.fileno(), READ_BYTES):
                pending += data
                *whole, pending = pending.split(b"\n")
                if whole:
                    self._add([line + b"\n" for line in whole])
        except OSError:
            pass
        if pending:
            self._add([pending])
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def _add(self, lines: list[bytes]) -> None:
        with self._changed:
            for line in lines:
                if self._on_line is not None:
                    self._on_line(line)
                self.lines.append(line)
            self._changed.notify_all()

    def send(self, line: bytes) -> bool:
        """Write one line; False when the server no longer reads."""
        assert self.proc.stdin is not None
        with self._writing:
            try:
                self.proc.stdin.write(line if line.endswith(b"\n") else line + b"\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return False
        return True

    def wait(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until `condition()` holds (it runs under the lines' lock), the
        server's output ends, or `timeout` passes; whether it holds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition():
                left = deadline - time.monotonic()
                if self.ended or left <= 0:
                    return condition()
                self._changed.wait(left)
            return True

    def close(self, timeout: float = EXIT_SECONDS) -> int:
        """Close stdin, read to the end, and reap the server (killed if it lingers)."""
        with self._writing:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Its own process group (start_new_session), started here: ours to end.
            os.killpg(self.proc.pid, signal.SIGKILL)
            status = self.proc.wait()
        self._reader.join(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return status
