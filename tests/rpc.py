"""Test clients for a real server: over a process's stdin and stdout, or in-process.

`RpcClient` holds the JSON-RPC logic (requests, responses by id, notifications,
typed results); a subclass supplies the bytes: `ServerProcess` runs the real
`bashrpc` (as `python -m bashrpc`); `tests.inprocess.InProcessServer` runs the
same server code on an in-memory transport in this process.
"""

from __future__ import annotations

import io
import itertools
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from bashrpc.protocol.client import (
    RESULT_TYPES,
    ClientCore,
    Replies,
    Unparsable,
    notification_params,
    reply_key,
    result_of,
)
from bashrpc.protocol.envelope import JSONRPC_VERSION, ErrorObject, RequestId, ServerMessage
from bashrpc.protocol.methods import (
    AbortBashParams,
    AbortBashResult,
    BashChunk,
    BashParams,
    BashResult,
    SessionInfo,
    SessionListResult,
)
from bashrpc.server.output.artifactroot import workspace_key

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[1])


def live_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def environ(pid: int) -> list[bytes] | None:
    """The process's environment as `NAME=value` entries; None once it is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def owned_processes(server_pid: int) -> list[int]:
    """Live processes started through the server with this pid (by their owner tag)."""
    tag = f"BASHRPC_OWNER={server_pid}.".encode()
    found = []
    for pid in live_pids():
        entries = environ(pid)
        if (
            entries is not None
            and not process_gone(pid)
            and any(e.startswith(tag) for e in entries)
        ):
            found.append(pid)
    return found


def process_gone(pid: int) -> bool:
    """True once the process has exited (a zombie counts as gone)."""
    stat = proc_stat(pid)
    return stat is None or stat[0] == "Z"


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


# Set once per run of the suite (`tests/conftest.py`) and inherited by all it
# starts: another run on the same machine uses the same markers.
SUITE_ENV = "BASHRPC_TEST_SUITE"


def another_suites(pid: int) -> bool:
    """Whether the process provably belongs to another run of the suite: it carries
    another run's token. One that carries none (`env -i`) may be this run's."""
    entries = environ(pid) or []
    ours = f"{SUITE_ENV}={os.environ.get(SUITE_ENV, '')}".encode()
    prefix = f"{SUITE_ENV}=".encode()
    return any(e.startswith(prefix) and e != ours for e in entries)


def marked_processes(marker: str) -> list[int]:
    """Live processes whose command line carries the marker (set with `exec -a`),
    but for another run's of the suite beside this one."""
    return [
        pid
        for pid in live_pids()
        if marker in cmdline(pid) and not process_gone(pid) and not another_suites(pid)
    ]


def wait_until(predicate: Any, timeout: float = DEFAULT_TIMEOUT, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


class Logs(Protocol):
    """What has a server's log: a process, a daemon, an in-process server."""

    def stderr(self) -> str: ...


def logged(process: Logs, text: str, timeout: float = DEFAULT_TIMEOUT) -> bool:
    """Whether `text` reaches the server's log within `timeout`. A live server
    writes its log on a thread of its own (`server/log.py`), so a line may
    land after the reply to the request that caused it."""
    return wait_until(lambda: text in process.stderr(), timeout)


# What the reader of a server process's stdout asks for at a time.
READ_BYTES = 1024 * 1024
# How the server begins a `bash/chunk` notification line.
_CHUNK_PREFIX = b'{"jsonrpc":"2.0","method":"bash/chunk"'

NoParams = msgspec.UnsetType
NO_PARAMS: NoParams = msgspec.UNSET


class RpcClient:
    """The client side of one connection, blocking, on the protocol's `ClientCore`;
    subclasses supply the bytes and call `_received` per line.

    Requests are the protocol's params Structs and replies stay `ServerMessage`s.
    The `_raw` methods put any JSON value on the wire as params, for the tests of
    what a server does with params no well-typed client would send."""

    def __init__(self) -> None:
        self.core = ClientCore()
        self._replies = Replies()
        self._queue: queue.Queue[ServerMessage | None] = queue.Queue()
        self.messages: list[ServerMessage] = []
        self._taken: set[int] = set()
        self.raw_lines: list[bytes] = []
        # Lines that were not JSON-RPC: always a bug, checked at teardown.
        self.garbage: list[Unparsable] = []
        # False: streamed chunks are counted, not kept (a test of gigabytes of output
        # would otherwise hold them all, twice).
        self.keep_chunks = True
        self.chunks_dropped = 0

    # -- plumbing (subclasses) ----------------------------------------------

    def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    def _received(self, line: bytes) -> None:
        if not self.keep_chunks and line.startswith(_CHUNK_PREFIX):
            self.chunks_dropped += 1
            return
        self.raw_lines.append(line)
        for message in self.core.line(line):
            if isinstance(message, Unparsable):
                self.garbage.append(message)
            else:
                self._queue.put(message)

    def _ended(self) -> None:
        self._queue.put(None)

    def _start_reading(self) -> None:
        """Read on a thread of its own (a subclass's `_read`, which waits on
        `_reading` before each read), so that `pause_reading` can stall it."""
        # Cleared: the reader stops taking the server's output, and its pipe fills.
        self._reading = threading.Event()
        self._reading.set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        raise NotImplementedError

    def pause_reading(self) -> None:
        """Stop reading (after the read under way), as a client that stalls."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    # -- messages -----------------------------------------------------------

    def request(
        self,
        method: str,
        params: msgspec.Struct | NoParams = NO_PARAMS,
        id: RequestId | None = None,
    ) -> RequestId:
        ident, line = self.core.request(method, params, id)
        self.send_raw(line)
        return ident

    def notify(self, method: str, params: msgspec.Struct | NoParams = NO_PARAMS) -> None:
        self.send_raw(self.core.notification(method, params))

    def request_raw(self, method: str, params: object, id: object = None) -> object:
        """A request whose params (and id) are any JSON value, as given."""
        ident = next(_raw_ids) if id is None else id
        self.send_raw(
            msgspec.json.encode(_RawRequest(id=ident, method=method, params=params)) + b"\n"
        )
        return ident

    def next_message(self, timeout: float = DEFAULT_TIMEOUT) -> ServerMessage:
        try:
            message = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("no message from the server") from None
        if message is None:
            self._queue.put(None)
            raise EOFError("the server closed its output")
        self.messages.append(message)
        self._replies.put(message)
        return message

    def wait_for(
        self, predicate: Callable[[ServerMessage], bool], timeout: float = DEFAULT_TIMEOUT
    ) -> ServerMessage:
        """The first message, received or still to come, that matches and was not taken."""
        for message in self.messages:
            if id(message) not in self._taken and predicate(message):
                self._taken.add(id(message))
                return message
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("expected message did not arrive")
            message = self.next_message(left)
            if predicate(message):
                self._taken.add(id(message))
                return message

    def receive_until(
        self, condition: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """Keep receiving until `condition()` holds over what has arrived."""
        deadline = time.monotonic() + timeout
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("condition not met")
            self.next_message(left)

    def response(self, ident: object, timeout: float = DEFAULT_TIMEOUT) -> ServerMessage:
        """The first reply to `ident`, received or still to come, not taken before."""
        assert reply_key(ident) is not None, ident
        deadline = time.monotonic() + timeout
        while True:
            while (message := self._replies.take(ident)) is not None:
                if id(message) not in self._taken:
                    self._taken.add(id(message))
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("expected message did not arrive")
            self.next_message(left)

    def call(
        self,
        method: str,
        params: msgspec.Struct | NoParams = NO_PARAMS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ServerMessage:
        return self.response(self.request(method, params), timeout)

    def call_raw(
        self, method: str, params: object, timeout: float = DEFAULT_TIMEOUT
    ) -> ServerMessage:
        return self.response(self.request_raw(method, params), timeout)

    def result(
        self,
        method: str,
        params: msgspec.Struct | NoParams = NO_PARAMS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> msgspec.Struct | None:
        """A method's result, as the Struct the protocol declares for it."""
        kind = RESULT_TYPES[method]
        reply = self.call(method, params, timeout)
        assert reply.error is None, reply.error
        return None if kind is None else result_of(reply, kind)

    def typed(
        self,
        kind: type[T],
        method: str,
        params: msgspec.Struct | NoParams = NO_PARAMS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> T:
        """A method's result, decoded into the protocol's Struct."""
        return ok_result(self.call(method, params, timeout), kind)

    def error(
        self,
        method: str,
        params: msgspec.Struct | NoParams = NO_PARAMS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> ErrorObject:
        """A method's error reply."""
        return error_of(self.call(method, params, timeout))

    def error_raw(
        self, method: str, params: object, timeout: float = DEFAULT_TIMEOUT
    ) -> ErrorObject:
        """The error reply to params that are any JSON value."""
        return error_of(self.call_raw(method, params, timeout))

    def sessions(self) -> dict[str, SessionInfo]:
        return {s.session_id: s for s in self.typed(SessionListResult, "session/list").sessions}

    def abort(self, **fields: Any) -> bool:
        """`abort_bash` with these AbortBashParams fields."""
        return self.typed(AbortBashResult, "abort_bash", AbortBashParams(**fields)).aborted

    def bash(self, command: str, wait: float = DEFAULT_TIMEOUT, **fields: Any) -> BashResult:
        """Run a command and return its BashResult; `fields` are BashParams'."""
        return self.typed(BashResult, "bash", BashParams(command=command, **fields), wait)

    def bash_result(self, ident: object, timeout: float = DEFAULT_TIMEOUT) -> BashResult:
        return ok_result(self.response(ident, timeout), BashResult)

    def notifications(self, method: str) -> list[ServerMessage]:
        return [m for m in self.messages if m.method == method]

    def notified(self, method: str, kind: type[T]) -> list[T]:
        """The params of every `method` notification received, decoded into `kind`."""
        return [notification_params(m, kind) for m in self.notifications(method)]

    def chunks_for(self, ident: object) -> list[BashChunk]:
        return [c for c in self.notified("bash/chunk", BashChunk) if c.request_id == ident]

    def stderr(self) -> str:
        raise NotImplementedError


class _RawRequest(msgspec.Struct):
    """A request with params of any shape, for the tests of bad params."""

    id: object
    method: str
    params: object
    jsonrpc: str = JSONRPC_VERSION


# Raw requests' ids: apart from the core's numbers, so the two never collide.
_raw_ids = (f"raw-{n}" for n in itertools.count(1))


def request_line(
    ident: RequestId, method: str, params: msgspec.Struct | NoParams = NO_PARAMS
) -> bytes:
    """One request's line with an id of the test's choosing, for the cases that
    write several at once (a batch, a host typing ahead)."""
    return ClientCore().request(method, params, ident)[1]


def ok_result(reply: ServerMessage, kind: type[T]) -> T:
    """A reply's result, which must not be an error, decoded into `kind`."""
    assert reply.error is None, reply.error
    return result_of(reply, kind)


def error_of(reply: ServerMessage) -> ErrorObject:
    """A reply's error, which it must have."""
    assert reply.error is not None, reply
    return reply.error


class ServerProcess(RpcClient):
    """The real `bashrpc` (`python -m bashrpc`), over its stdin and stdout."""

    def __init__(
        self,
        *args: str,
        tmp: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        artifacts: bool = True,
        preexec_fn: Any = None,
        new_session: bool = False,
        launcher: tuple[str, ...] = (),
        interpreter: tuple[str, ...] = (sys.executable,),
        unread_stderr: bool = False,
    ) -> None:
        """`launcher`: what runs the server (`setpriv --reuid ...`), before its argv;
        `interpreter`: the Python that runs it (one a dropped uid may execute);
        `unread_stderr`: its stderr a pipe nobody reads (`stderr()` is then empty)."""
        super().__init__()
        self.tmp = tmp
        self.artifacts_root = tmp / "artifacts"
        flags = [i for i, arg in enumerate(args) if arg in ("--workspace", "--cwd")]
        workspace = args[flags[-1] + 1] if flags else cwd or tmp
        # This server's workspace's own directory under the root.
        self.artifacts_dir = self.artifacts_root / workspace_key(Path(workspace).resolve())
        argv = [*launcher, *interpreter, "-m", "bashrpc", *args]
        if artifacts and "--artifacts-dir" not in args:
            argv += ["--artifacts-dir", str(self.artifacts_root)]
        self.stderr_path = tmp / f"stderr-{id(self)}.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if unread_stderr else self._stderr,
            env=server_environment(tmp, env),
            cwd=cwd or tmp,
            preexec_fn=preexec_fn,
            # Its own process group, so a test can SIGKILL the group without pytest.
            start_new_session=new_session,
        )
        self._start_reading()

    def _read(self) -> None:
        """Big reads, split here: iterating the pipe's file reads 8 KiB at a time,
        which for gigabytes of chunk lines was most of a test's own CPU."""
        stdout = self.proc.stdout
        assert isinstance(stdout, io.BufferedReader)
        part: list[bytes] = []
        try:
            # read1 (not os.read on the fd): a test may close the file to break the pipe.
            while self._reading.wait() and (data := stdout.read1(READ_BYTES)):
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    part.append(data[start : end + 1])
                    self._received(b"".join(part))
                    part.clear()
                    start = end + 1
                if start < len(data):
                    part.append(data[start:])
        except (OSError, ValueError):
            pass  # a test closed our end of stdout on purpose
        self._ended()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def owned_processes(self) -> list[int]:
        return owned_processes(self.proc.pid)

    def owned_commands(self) -> list[str]:
        """Command lines of the live processes started through this server."""
        return [cmdline(pid) for pid in self.owned_processes()]

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def server_pid(self) -> int:
        """The process that runs the shells (a bridge's daemon; here the same)."""
        return self.proc.pid

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def server_environment(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a test server runs in: a private, empty HOME, so the
    developer's own rc files never leak in, and private XDG directories (made: see
    `tests.inprocess.environment`)."""
    env = dict(os.environ)
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    (tmp / "config").mkdir(exist_ok=True)
    env["HOME"] = str(home)
    env.setdefault("XDG_STATE_HOME", str(tmp / "state"))
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env.update(extra or {})
    return env
