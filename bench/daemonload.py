"""Many connections on one daemon: their aggregate rate, and one connection's
flood against the others' replies.

One thread drives every looping connection through a selector, so the client
is one core's worth of Python however many connections there are; the flood
has a thread of its own that reads everything, as a host that keeps up does.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bashrpc.protocol.client import ClientCore
from bashrpc.protocol.methods import BashParams
from bashrpc.server.daemon import socketpath
from bench.fairness import flood_command
from bench.rows import Row, at_least, percentile
from bench.workbench import Workbench

REPLY_PREFIX = b'{"jsonrpc":"2.0","id":'
READ_BYTES = 256 * 1024
DAEMON_START_SECONDS = 30.0
TRUE = BashParams(command="true")


class Daemon:
    """`bashrpc daemon` on a socket of its own, for one measurement."""

    def __init__(self, workdir: Path, shells: int) -> None:
        self.socket_path = Path(tempfile.mkdtemp(dir=workdir)) / socketpath.SOCKET_NAME
        config = workdir / "daemon.toml"
        config.write_text(f"[sessions]\nmaxShells = {shells}\n")
        argv = [sys.executable, "-m", "bashrpc", "daemon", "--socket", str(self.socket_path)]
        argv += ["--config", str(config), "--artifacts-dir", str(workdir / "artifacts")]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + DAEMON_START_SECONDS
        # The path appears once the socket listens (it is renamed into place): the
        # lock's holder is known before that, while it binds.
        while not self.socket_path.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the daemon did not start")
            time.sleep(0.05)

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(self.socket_path))
        return sock

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class _Loop:
    """One connection running `true` again and again, a request at a time."""

    def __init__(self, sock: socket.socket, calls: int) -> None:
        self.sock = sock
        self.left = calls
        self.buffer = b""
        self.sent_at = 0.0
        self.samples: list[float] = []
        self._core = ClientCore()

    def send_next(self) -> None:
        _, line = self._core.request("bash", TRUE)
        self.sent_at = time.perf_counter()
        self.sock.sendall(line)

    def received(self, data: bytes) -> int:
        """Replies completed by `data`; the next request goes out after each."""
        self.buffer += data
        done = 0
        while (end := self.buffer.find(b"\n")) >= 0:
            line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
            if line.startswith(REPLY_PREFIX):
                self.samples.append(time.perf_counter() - self.sent_at)
                self.left -= 1
                done += 1
                if self.left > 0:
                    self.send_next()
        return done


def run_loops(daemon: Daemon, connections: int, calls: int) -> tuple[float, list[float]]:
    """(calls per second over all `connections`, every call's latency). Each
    connection's first call (its tenant's shell, and the rc capture that shell
    waits for) is answered before any is timed, so the loops run together."""
    loops = [_Loop(daemon.connect(), 1) for _ in range(connections)]
    selector = selectors.DefaultSelector()
    for loop in loops:
        selector.register(loop.sock, selectors.EVENT_READ, loop)
        loop.send_next()
    _until_done(selector, loops)
    for loop in loops:
        loop.samples.clear()
        loop.left = calls
    started = time.perf_counter()
    for loop in loops:
        loop.send_next()
    _until_done(selector, loops)
    elapsed = time.perf_counter() - started
    for loop in loops:
        loop.sock.close()
    samples = [s for loop in loops for s in loop.samples]
    return len(samples) / elapsed, samples


def _until_done(selector: selectors.BaseSelector, loops: list[_Loop]) -> None:
    """Read replies until every loop has made all its calls."""
    running = {loop for loop in loops if loop.left > 0}
    while running:
        for key, _ in selector.select():
            loop = key.data
            data = loop.sock.recv(READ_BYTES)
            if not data:
                raise EOFError("the daemon closed a connection")
            loop.received(data)
            if loop.left == 0:
                running.discard(loop)


class _Flood:
    """A connection that runs a flood and reads all of it."""

    def __init__(self, daemon: Daemon, megabytes: int) -> None:
        self.sock = daemon.connect()
        self.done = threading.Event()
        ident, line = ClientCore().request("bash", BashParams(command=flood_command(megabytes)))
        # How its reply begins: the reader stops there.
        self._reply_start = REPLY_PREFIX + f"{ident},".encode()
        self.sock.sendall(line)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        tail = b""
        try:
            while data := self.sock.recv(READ_BYTES):
                tail = (tail + data)[-READ_BYTES:]
                if b"\n" + self._reply_start in tail or tail.startswith(self._reply_start):
                    break
        except OSError:
            pass  # closed under it: the measurement is over
        self.done.set()

    def close(self) -> None:
        """Cut the flood's connection (the daemon aborts its command) and stop reading."""
        self.sock.shutdown(socket.SHUT_RDWR)
        self._reader.join(timeout=30)
        self.sock.close()


def daemon_connections(bench: Workbench) -> list[Row]:
    sizes, workdir = bench.sizes, bench.workdir
    n, calls = sizes.daemon_connections, sizes.daemon_calls
    cores = os.cpu_count() or 1
    one = Row("daemon", "1 connection × `true`", "calls/s")
    many = Row("daemon", f"{n} connections × `true`", "calls/s")
    ratio = at_least("daemon", f"{n} connections / (1 connection × {cores} cores)", "×", 0.7)
    idle_p50 = Row("daemon", f"`true` p50, {n} connections", "ms")
    busy_p50 = Row("daemon", f"`true` p50, {n - 1} connections while one floods", "ms")
    busy_p99 = Row("daemon", f"`true` p99, {n - 1} connections while one floods", "ms")
    for _ in range(sizes.repeat):
        daemon = Daemon(workdir, shells=n + 1)
        try:
            rate, _ = run_loops(daemon, 1, calls * 4)
            one.values.append(rate)
            rate, samples = run_loops(daemon, n, calls)
            many.values.append(rate)
            idle_p50.values.append(percentile(samples, 0.5) * 1e3)
            ratio.values.append(rate / (one.values[-1] * cores))
            flood = _Flood(daemon, sizes.flood_megabytes)
            try:
                _, busy = run_loops(daemon, n - 1, calls)
            finally:
                flood.close()
            busy_p50.values.append(percentile(busy, 0.5) * 1e3)
            busy_p99.values.append(percentile(busy, 0.99) * 1e3)
        finally:
            daemon.close()
    return [one, many, ratio, idle_p50, busy_p50, busy_p99]
