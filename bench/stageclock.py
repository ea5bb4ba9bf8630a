"""The stage clock: where one call's time goes inside the server, by the clock.

A profiler counts calls and inflates each; py-spy, sampling from outside, tears
the stacks of an event loop. This starts the server with a probe at each point
on a request's way (`PROBES`), which notes the time as the point is passed, and
gives each stage's median over many calls of one command: its table is the
benchmarks page's "By the clock". A probe costs about 1 µs of its own.

    python -m bench.stageclock [--calls 3000] [--method bash|tools/call]

The probes name the server's own functions: renamed, the clock stops with the
name it misses (a test runs it).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from bashrpc.protocol.mcp import BashToolArguments
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams
from bench.client import BenchServer, time_calls

ROOT = Path(__file__).resolve().parents[1]
# Where the probed server writes its marks' stages, as JSON.
OUT_ENV = "BASHRPC_STAGECLOCK_OUT"
# The calls before these are the warm-up, left out.
WARMUP = 200


class Probe(msgspec.Struct, frozen=True):
    label: str
    # What has happened when the probe notes its time.
    passed: str
    module: str
    qualname: str
    # "enter": as the function is called; "exit": as it returns (an async one,
    # once its awaits are over).
    at: Literal["enter", "exit"]


_SHELL = "bashrpc.server.runtime.shell"
_COMMANDS = "bashrpc.server.services.commands"
PROBES = (
    Probe("A", "stdin readable", "bashrpc.server.wire.stdio", "FdReceiveStream._readable", "enter"),
    Probe("W", "its task runs it", "bashrpc.server.connection", "Connection._run", "enter"),
    Probe("R", "the command service", _COMMANDS, "CommandService.run", "enter"),
    Probe("T", "its session's turn", _COMMANDS, "CommandService._now", "enter"),
    Probe("P", "the shell's run", f"{_SHELL}.process", "Shell.run", "enter"),
    Probe("B", "driver line written", f"{_SHELL}.wire", "ShellWire.hand", "exit"),
    Probe("C", "status record readable", f"{_SHELL}.channels", "StatusChannel._readable", "enter"),
    Probe("E", "its task awake", f"{_SHELL}.command", "CommandRun.until_ended", "exit"),
    Probe("F", "output drained", f"{_SHELL}.command", "CommandRun.drain", "exit"),
    Probe("G", "the shell's run over", f"{_SHELL}.process", "Shell.run", "exit"),
    Probe("O", "the outcome", _COMMANDS, "CommandService.run", "exit"),
    Probe("S", "streams flushed", _COMMANDS, "CommandService.stream", "exit"),
    Probe("V", "the surface's result", "bashrpc.server.services.request", "serve", "exit"),
    Probe("X", "reply encoded", "bashrpc.server.wire.outbox", "Outbox.put", "enter"),
    Probe("D", "reply written", "bashrpc.server.wire.stdio", "FdSendStream.try_send", "exit"),
)
# The shell's own part: from its driver line to its status record.
SHELL_STAGE = ("B", "C")


class Stage(msgspec.Struct, frozen=True):
    """From one probe to the next: what had happened, then what has."""

    start: str
    end: str
    began: str
    ended: str
    median_us: float


class Clock(msgspec.Struct, frozen=True):
    calls: int
    stages: list[Stage]


def _probed(
    fn: Callable[..., Any], label: str, at: Literal["enter", "exit"], marks: list[tuple[str, float]]
) -> Any:
    clock = time.perf_counter
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            if at == "enter":
                marks.append((label, clock()))
            result = await fn(*args, **kwargs)
            if at == "exit":
                marks.append((label, clock()))
            return result

        return timed

    @functools.wraps(fn)
    def timed_sync(*args: Any, **kwargs: Any) -> Any:
        if at == "enter":
            marks.append((label, clock()))
        result = fn(*args, **kwargs)
        if at == "exit":
            marks.append((label, clock()))
        return result

    return timed_sync


def install(probes: tuple[Probe, ...], marks: list[tuple[str, float]]) -> None:
    """Each probe around its function, where its callers look it up (its class,
    or its module); AttributeError names a probe whose function is gone."""
    for probe in probes:
        owner: Any = importlib.import_module(probe.module)
        *path, name = probe.qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, _probed(getattr(owner, name), probe.label, probe.at, marks))


def stages(marks: list[tuple[str, float]], probes: tuple[Probe, ...], skip: int) -> Clock:
    """Each stage's median over the calls whose marks came in the probes' order,
    one call after another (the first `skip` left out)."""
    order = [probe.label for probe in probes]
    spans: list[list[float]] = [[] for _ in probes[1:]]
    labels = [label for label, _ in marks]
    at, seen = 0, 0
    while at + len(order) <= len(marks):
        if labels[at : at + len(order)] != order:
            at += 1
            continue
        seen += 1
        if seen > skip:
            for i in range(len(order) - 1):
                spans[i].append(marks[at + i + 1][1] - marks[at + i][1])
        at += len(order)
    calls = max(0, seen - skip)
    if calls == 0:
        last = "".join(labels[-3 * len(order) :])
        raise RuntimeError(f"no call passed the probes in order {''.join(order)}; the last: {last}")
    return Clock(
        calls,
        [
            Stage(a.label, b.label, a.passed, b.passed, statistics.median(span) * 1e6)
            for a, b, span in zip(probes[:-1], probes[1:], spans, strict=True)
        ],
    )


def serve_probed() -> None:
    """The server's entry point, probed; its stages written where OUT_ENV says."""
    from bashrpc.server.cli.main import main

    marks: list[tuple[str, float]] = []
    install(PROBES, marks)
    try:
        # `python -c`: its own arguments follow the code.
        main(sys.argv[1:])
    finally:
        clock = stages(marks, PROBES, WARMUP)
        Path(os.environ[OUT_ENV]).write_bytes(msgspec.json.encode(clock))


def measure(python: str, method: str, calls: int, work: Path) -> Clock:
    params: msgspec.Struct = (
        BashParams(command="true")
        if method == "bash"
        else bash_tool_call(BashToolArguments(command="true"))
    )
    out = work / "stages.json"
    boot = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "import bench.stageclock; bench.stageclock.serve_probed()"
    )
    server = BenchServer(
        work / "artifacts", python=python, entry=("-c", boot), env={OUT_ENV: str(out)}
    )
    time_calls(server, method, params, WARMUP + calls)
    server.close()
    return msgspec.json.decode(out.read_bytes(), type=Clock)


def table(clock: Clock) -> str:
    lines = ["| stage | µs (p50) |", "| --- | --- |"]
    total = 0.0
    for stage in clock.stages:
        total += stage.median_us
        shell = (stage.start, stage.end) == SHELL_STAGE
        name = f"{stage.began} → {stage.ended}" + (" (bash)" if shell else "")
        lines.append(f"| {name} | {stage.median_us:.1f} |")
    shell_us = sum(s.median_us for s in clock.stages if (s.start, s.end) == SHELL_STAGE)
    lines.append(f"| all ({clock.calls} calls) | {total:.1f} |")
    lines.append(f"| the server's own (all but bash's) | {total - shell_us:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stageclock", description=__doc__)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--method", choices=("bash", "tools/call"), default="bash")
    parser.add_argument("--python", default=sys.executable, help="the install's interpreter")
    parser.add_argument("--json", action="store_true", help="the stages as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bashrpc-stageclock-") as tmp:
        clock = measure(args.python, args.method, args.calls, Path(tmp))
    print(msgspec.json.encode(clock).decode() if args.json else table(clock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
