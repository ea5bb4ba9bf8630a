"""Fairness: one session's flood must not stall another's replies.

The client here reads everything the server writes on a thread of its own, as
a host that keeps up does, so what is measured is the server's head-of-line
blocking and not a client that stopped reading. That reader is kept light:
on two cores its CPU is taken from the flood, the shell of `a` and the
server it measures, and a reader that holds the GIL delays the caller's
wakeup. So it reads a MiB at a time and tells a notification from a reply by
its first bytes, decoding only replies (the server writes every line in the
same member order).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from bashrpc.protocol.client import ClientCore, Unparsable
from bashrpc.protocol.envelope import RequestId, ServerMessage
from bashrpc.protocol.methods import BashParams
from bench.client import rss_kib, spawn_server, time_calls, time_calls_while
from bench.rows import MB, Row, at_least, at_most, percentile
from bench.workbench import Workbench

# How long a flood or a reply may take before the bench gives up on the server.
WAIT_LIMIT_SECONDS = 600.0
# The reader's reads: many 64 KiB chunk lines per read, so few wakeups and GIL takes.
READ_BYTES = 1024 * 1024
# How every notification line begins (`protocol.envelope.Notification`'s order).
NOTIFICATION_PREFIX = b'{"jsonrpc":"2.0","method":'


def flood_command(megabytes: int) -> str:
    """The issue's flood: `megabytes` MB of lines of 100 characters."""
    return f"head -c {megabytes}M /dev/zero | tr '\\0' x | fold -w 100"


def flood_bytes(megabytes: int) -> int:
    """What `flood_command` prints: a newline after every 100 characters."""
    size = megabytes * 1024 * 1024
    return size + size // 100 + (1 if size % 100 else 0)


class ReadingServer:
    """A server whose output a thread reads as fast as it comes; replies are
    handed to the callers waiting for them, notifications only counted."""

    def __init__(self, artifacts_dir: Path, *args: str) -> None:
        self.proc = spawn_server(artifacts_dir, *args)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout
        self._core = ClientCore()
        self._writing = threading.Lock()
        self._lock = threading.Lock()
        self._waiting: dict[RequestId, threading.Event] = {}
        self._replies: dict[RequestId, ServerMessage] = {}
        self.notification_bytes = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        fd = self._out.fileno()
        # The start of a line that the last read cut.
        partial = b""
        while data := os.read(fd, READ_BYTES):
            start = 0
            if partial:
                end = data.find(b"\n")
                if end < 0:
                    partial += data
                    continue
                self._line(partial + data[: end + 1])
                partial, start = b"", end + 1
            while (end := data.find(b"\n", start)) >= 0:
                if data.startswith(NOTIFICATION_PREFIX, start):
                    self.notification_bytes += end + 1 - start
                else:
                    self._reply(data[start : end + 1])
                start = end + 1
            partial = data[start:]

    def _line(self, line: bytes) -> None:
        if line.startswith(NOTIFICATION_PREFIX):
            self.notification_bytes += len(line)
        else:
            self._reply(line)

    def _reply(self, line: bytes) -> None:
        [message] = self._core.line(line)
        assert not isinstance(message, Unparsable), message.reason
        assert message.method is None and isinstance(message.id, int)
        with self._lock:
            self._replies[message.id] = message
            done = self._waiting.get(message.id)
        if done is not None:
            done.set()

    def send(self, method: str, params: msgspec.Struct) -> RequestId:
        with self._writing:
            ident, line = self._core.request(method, params)
            with self._lock:
                self._waiting[ident] = threading.Event()
            self._in.write(line)
            self._in.flush()
        return ident

    def wait(self, ident: RequestId) -> ServerMessage:
        if not self._waiting[ident].wait(WAIT_LIMIT_SECONDS):
            raise TimeoutError(f"no reply to request {ident}")
        with self._lock:
            del self._waiting[ident]
            message = self._replies.pop(ident)
        if message.error is not None:
            raise RuntimeError(message.error.message)
        return message

    def call(self, method: str, params: msgspec.Struct) -> ServerMessage:
        return self.wait(self.send(method, params))

    def answered(self, ident: RequestId) -> bool:
        with self._lock:
            return ident in self._replies

    def unanswered(self, ident: RequestId) -> Callable[[], bool]:
        """A test that holds until request `ident` is answered."""
        return lambda: not self.answered(ident)

    def rss_mib(self) -> float:
        return rss_kib(self.pid) / 1024

    def close(self) -> None:
        with self._writing:
            self._in.close()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


def true_params(session: str) -> BashParams:
    return BashParams(command="true", session_id=session)


def latencies_beside(
    server: ReadingServer, command: str, session: str
) -> tuple[list[float], float]:
    """`true` in `session` while `command` runs outside the server, and the seconds
    it ran: what the machine's CPU alone costs a reply and the flood, the floor
    the server cannot go under."""
    started = time.perf_counter()
    outside = subprocess.Popen(["bash", "-c", command], stdout=subprocess.DEVNULL)
    try:
        samples = time_calls_while(
            server, "bash", true_params(session), lambda: outside.poll() is None
        )
    finally:
        outside.wait()
    return samples, time.perf_counter() - started


def timed_outside(command: str) -> float:
    """Seconds `command` takes outside the server, its output discarded."""
    started = time.perf_counter()
    subprocess.run(["bash", "-c", command], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def timed_flood(server: ReadingServer, megabytes: int) -> float:
    """Seconds the flood took from request to reply, with every byte read."""
    started = time.perf_counter()
    server.call("bash", BashParams(command=flood_command(megabytes), session_id="b"))
    return time.perf_counter() - started


def first_commands(workdir: Path, sessions: int) -> tuple[float, float]:
    """(ms per session to start `sessions` sessions' first commands, all at once;
    the server's RSS in MiB after them)."""
    config = workdir / "many-sessions.toml"
    config.write_text(f"[sessions]\nmaxShells = {sessions}\n")
    server = ReadingServer(workdir / "artifacts", "--config", str(config))
    try:
        server.call("bash", BashParams(command="true"))
        started = time.perf_counter()
        idents = [
            server.send("bash", BashParams(command="true", session_id=f"s{i}"))
            for i in range(sessions)
        ]
        for ident in idents:
            server.wait(ident)
        elapsed = time.perf_counter() - started
        return elapsed / sessions * 1e3, server.rss_mib()
    finally:
        server.close()


def fairness(bench: Workbench) -> list[Row]:
    s = bench.sizes
    idle_p50 = Row("fairness", "`true` in a, idle: p50", "ms")
    busy_p50 = Row("fairness", "`true` in a while b floods: p50", "ms")
    busy_p99 = Row("fairness", "`true` in a while b floods: p99", "ms")
    floor_p50 = Row("fairness", "baseline: `true` while the flood runs outside: p50", "ms")
    floor_p99 = Row("fairness", "baseline: `true` while the flood runs outside: p99", "ms")
    p50_ratio = at_most("fairness", "flooded p50 / idle p50", "×", 3)
    p99_ratio = at_most("fairness", "flooded p99 / idle p50", "×", 20)
    alone = Row("fairness", "flood alone", "MB/s")
    shared = Row("fairness", "flood while a runs `true`", "MB/s")
    kept = at_least("fairness", "flood shared / alone", "×", 0.8)
    kept_outside = Row(
        "fairness", "baseline: the flood outside, shared with a's `true` / alone", "×"
    )
    size = flood_bytes(s.flood_megabytes) / MB
    for _ in range(s.repeat):
        server = ReadingServer(bench.artifacts)
        try:
            time_calls(server, "bash", true_params("a"), s.warmup_calls)
            idle = time_calls(server, "bash", true_params("a"), s.latency_calls)
            idle_p50.values.append(percentile(idle, 0.5) * 1e3)
            beside, beside_seconds = latencies_beside(server, flood_command(s.flood_megabytes), "a")
            kept_outside.values.append(
                timed_outside(flood_command(s.flood_megabytes)) / beside_seconds
            )
            alone.values.append(size / timed_flood(server, s.flood_megabytes))
            started = time.perf_counter()
            ident = server.send(
                "bash", BashParams(command=flood_command(s.flood_megabytes), session_id="b")
            )
            # `true` in a, again and again, until the flood is answered.
            busy = time_calls_while(server, "bash", true_params("a"), server.unanswered(ident))
            server.wait(ident)
            shared.values.append(size / (time.perf_counter() - started))
        finally:
            server.close()
        for path in bench.artifacts.rglob("*.bash.log"):
            path.unlink()
        floor_p50.values.append(percentile(beside, 0.5) * 1e3)
        floor_p99.values.append(percentile(beside, 0.99) * 1e3)
        busy_p50.values.append(percentile(busy, 0.5) * 1e3)
        busy_p99.values.append(percentile(busy, 0.99) * 1e3)
        p50_ratio.values.append(busy_p50.values[-1] / idle_p50.values[-1])
        p99_ratio.values.append(busy_p99.values[-1] / idle_p50.values[-1])
        kept.values.append(shared.values[-1] / alone.values[-1])
    return [
        idle_p50,
        floor_p50,
        floor_p99,
        busy_p50,
        busy_p99,
        p50_ratio,
        p99_ratio,
        alone,
        shared,
        kept,
        kept_outside,
        *scale(bench),
    ]


def scale(bench: Workbench) -> list[Row]:
    n = bench.sizes.many_sessions
    per_session = at_most("fairness", f"{n} sessions' first commands", "ms/session", 15)
    rss = at_most("fairness", f"server RSS with {n} shells", "MiB", 64)
    for _ in range(bench.sizes.repeat):
        ms, mib = first_commands(bench.workdir, n)
        per_session.values.append(ms)
        rss.values.append(mib)
    return [per_session, rss]
