"""A lean blocking client for benchmarks: one server process, requests over its pipes."""

from __future__ import annotations

import hashlib
import itertools
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from bashrpc.protocol.client import ClientCore, Unparsable, result_of
from bashrpc.protocol.envelope import RequestId, ServerMessage
from bashrpc.protocol.methods import BashChunk, BashParams
from bashrpc.server.cli.keepalive import Keepalive
from bench.rows import percentile

T = TypeVar("T")


class Caller(Protocol):
    def call(self, method: str, params: msgspec.Struct) -> ServerMessage: ...


# How the interpreter starts the server: as its console script does.
SERVE = ("-m", "bashrpc")


def spawn_server(
    artifacts_dir: Path,
    *args: str,
    home: Path | None = None,
    python: str = sys.executable,
    entry: Sequence[str] = SERVE,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`python -m bashrpc` on pipes, its log discarded; `python` names another
    install's interpreter (an interleaved before and after), `entry` another
    start (`bench/stageclock.py`'s, probed), `env` variables besides ours."""
    environ = {**os.environ, **(env or {})}
    if home is not None:
        environ["HOME"] = str(home)
    return subprocess.Popen(
        [python, *entry, "--artifacts-dir", str(artifacts_dir), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environ,
    )


def time_calls_while(
    server: Caller, method: str, params: msgspec.Struct, go_on: Callable[[], bool]
) -> list[float]:
    """Each call's seconds, one call at a time, for as long as `go_on()` holds."""
    samples = []
    while go_on():
        started = time.perf_counter()
        server.call(method, params)
        samples.append(time.perf_counter() - started)
    return samples


def time_calls(server: Caller, method: str, params: msgspec.Struct, calls: int) -> list[float]:
    left = itertools.count(calls, -1)
    return time_calls_while(server, method, params, lambda: next(left) > 0)


# Calls of one kind in a row before the next kind's turn, when kinds take turns.
INTERLEAVE_BLOCK = 100


def in_turn(items: Sequence[T], round_: int) -> list[T]:
    """`items` in their order in even rounds, reversed in odd ones: what takes
    turns this way meets the machine's drift alike, whichever goes first."""
    return list(items) if round_ % 2 == 0 else list(reversed(items))


def time_interleaved(
    server: Caller,
    kinds: Sequence[tuple[str, msgspec.Struct]],
    calls: int,
    block: int = INTERLEAVE_BLOCK,
) -> list[list[float]]:
    """`calls` of each kind, each call's seconds, in blocks that take turns (their
    order reversed every round), so the machine's drift falls on every kind
    alike: what a ratio between two kinds is read from, as `bench.ab` reads one
    between two servers."""
    samples: list[list[float]] = [[] for _ in kinds]
    for start in range(0, calls, block):
        n = min(block, calls - start)
        for i, (method, params) in in_turn(list(enumerate(kinds)), start // block):
            samples[i] += time_calls(server, method, params, n)
    return samples


def warm_and_first_true(
    server: Caller, *, warmup: int, calls: int, sessions: int
) -> tuple[float, float]:
    """`true`'s p50 on a warmed shell and the median first `true` of `sessions`
    new sessions, in ms: what a setting (a sandbox, an allowlist) costs per
    command, and at a session's start."""
    true = BashParams(command="true")
    for _ in range(warmup):
        server.call("bash", true)
    samples = time_calls(server, "bash", true, calls)
    firsts = [
        time_calls(server, "bash", BashParams(command="true", session_id=f"n{i}"), 1)[0]
        for i in range(sessions)
    ]
    return percentile(samples, 0.5) * 1e3, statistics.median(firsts) * 1e3


def startup_ms(
    artifacts_dir: Path, *, home: Path | None = None, python: str = sys.executable
) -> float:
    """Milliseconds from spawning a server to its first `bash true` result."""
    started = time.perf_counter()
    server = BenchServer(artifacts_dir, home=home, python=python)
    try:
        server.call("bash", BashParams(command="true"))
        return (time.perf_counter() - started) * 1e3
    finally:
        server.close()


class BenchServer:
    def __init__(
        self,
        artifacts_dir: Path,
        *args: str,
        home: Path | None = None,
        python: str = sys.executable,
        entry: Sequence[str] = SERVE,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.proc = spawn_server(
            artifacts_dir, *args, home=home, python=python, entry=entry, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._out = self.proc.stdout
        self._core = ClientCore()
        # The keepalive thread writes too: one line at a time.
        self._writing = threading.Lock()
        self._keepalive = Keepalive(self.send)
        self.notifications = 0
        self.first_notification_at: float | None = None
        # Given the text of every `bash/chunk`, as bytes (to check the stream's integrity).
        self.on_chunk: Callable[[bytes], None] | None = None
        # Bytes the stream said it skipped (a reader slower than the flood): the
        # stream then holds less than the output, and only the artifact all of it.
        self.skipped_bytes = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, method: str, params: msgspec.Struct) -> RequestId:
        with self._writing:
            ident, line = self._core.request(method, params)
            self._in.write(line)
            self._in.flush()
        return ident

    def next_message(self) -> ServerMessage:
        """The server's next message, whatever it is."""
        return self._next()

    def _next(self) -> ServerMessage:
        line = self._out.readline()
        if not line:
            raise EOFError("the server exited")
        [message] = self._core.line(line)
        if isinstance(message, Unparsable):
            raise RuntimeError(f"not JSON-RPC: {message.reason}")
        return message

    def wait(self, ident: RequestId) -> ServerMessage:
        while True:
            message = self._next()
            if message.method is not None:
                self.notifications += 1
                if self.first_notification_at is None:
                    self.first_notification_at = time.perf_counter()
                if self.on_chunk is not None and message.method == "bash/chunk":
                    chunk = msgspec.json.decode(message.params, type=BashChunk)
                    self.skipped_bytes += chunk.skipped
                    self.on_chunk(chunk.text.encode())
                continue
            if message.id == ident:
                if message.error is not None:
                    raise RuntimeError(message.error.message)
                return message

    def call(self, method: str, params: msgspec.Struct) -> ServerMessage:
        return self.wait(self.send(method, params))

    def result(self, kind: type[T], method: str, params: msgspec.Struct) -> T:
        return result_of(self.call(method, params), kind)

    def wait_all(self, idents: list[RequestId]) -> None:
        pending = set(idents)
        while pending:
            message = self._next()
            if message.method is None and isinstance(message.id, (int, str)):
                pending.discard(message.id)

    def close(self) -> None:
        self._keepalive.stop()
        with self._writing:
            self._in.close()
        self.proc.wait(timeout=30)


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def run_ns(pid: int) -> int:
    """Nanoseconds all of the process's threads have run so far, by the
    scheduler's own clock (`schedstat`): exact, where `stat`'s CPU times are
    counted in ticks of 10 ms. A thread that ended meanwhile is not counted."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            total += _thread_ns(f"/proc/{pid}/task/{thread}")
        except FileNotFoundError:
            continue
    return total


def _thread_ns(task: str) -> int:
    try:
        with open(f"{task}/schedstat") as f:
            return int(f.read().split()[0])
    except FileNotFoundError:
        if not os.path.isdir(task):
            raise
    # A kernel built without it: the thread's CPU times, in ticks.
    return _cpu_ticks(f"{task}/stat") * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    return _cpu_ticks(f"/proc/{pid}/stat") / os.sysconf("SC_CLK_TCK")


def _cpu_ticks(stat: str) -> int:
    """utime + stime of a `stat` file (a process's or a thread's), in clock ticks."""
    with open(stat) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks: a flood's output is larger than memory should hold."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
