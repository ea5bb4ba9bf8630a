"""The floors latency and startup are measured against, in the same run: what
this machine allows any server in Python that keeps a bash, with nothing of
the server's own in them.

- The relay floor (`latencyfloor.py`): a command's round trip through a bare
  relay that keeps one bash, a line in and a status line back.
- The protocol floor (`driverfloor.py`): the server's own shell protocol by the
  same bare relay; and the loop floor (`loopfloor.py`): that protocol served as
  the server serves it, under uvloop with JSON-RPC in and out, in callbacks.
  What the server takes beyond the loop floor is its own per-command work.
- The structured floor (`taskfloor.py`): the loop floor in the shape the server
  must have: each request in a task of a task group (handed to one that waits,
  as the server does), a cancel scope, an event.
  What the server takes beyond it is what its features cost.
- Bash's own fork and exec of `/bin/true`, timed inside one bash (`time` of a
  loop): what `/bin/true` costs a persistent shell beyond its round trip.
- The CPU a `true` costs the server's process and the floors' own (all their
  threads, by the scheduler's clock): latency on a machine whose idle CPUs
  halt also reads where each process woke, the CPU only the work.
- Startup's parts: the interpreter (`python -c pass`), the interpreter with
  the server's imports, and one bash start.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import msgspec

from bashrpc.protocol.client import ClientCore, Unparsable
from bashrpc.protocol.mcp import EmptyParams
from bashrpc.protocol.methods import BashParams
from bench.client import BenchServer, Caller, run_ns, time_calls
from bench.latencyfloor import READY
from bench.rows import Row, at_most, percentile
from bench.workbench import Sizes

# Run as files: the relay imports nothing of the server's, the driver only its
# shell protocol, wherever the bench runs from.
LATENCY_FLOOR = Path(__file__).with_name("latencyfloor.py")
DRIVER_FLOOR = Path(__file__).with_name("driverfloor.py")
# The loop floor imports the driver's pieces: run as a module, from the checkout.
ROOT = Path(__file__).resolve().parents[1]
# What `python -m bashrpc` imports to serve stdio, its entry point and the server
# (the entry point alone loads no server: each subcommand loads in its branch).
SERVER_MAIN = "bashrpc.server.cli.main, bashrpc.server.serve"
BARE_BASH = ("bash", "--noprofile", "--norc")


class FloorRun(msgspec.Struct, frozen=True):
    # Seconds per timed round trip.
    samples: list[float]
    # The floor program's own CPU per timed round trip (its bash's not counted), µs.
    cpu_us: float


def floor_latency(
    argv: list[str],
    round_trip: Callable[[IO[bytes], IO[bytes]], None],
    calls: int,
    warmup: int,
    cwd: Path | None = None,
) -> FloorRun:
    """Round trips through a floor program (`argv`), once it says it is ready:
    `calls` of them after `warmup` untimed ones. `round_trip` writes one
    request to the program's stdin and reads its answer, raising on a wrong one."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    samples = []
    try:
        if proc.stdout.readline() != READY:
            raise RuntimeError(f"the floor {argv[1:]} did not start")
        for _ in range(warmup):
            round_trip(proc.stdin, proc.stdout)
        ran = run_ns(proc.pid)
        for _ in range(calls):
            started = time.perf_counter()
            round_trip(proc.stdin, proc.stdout)
            samples.append(time.perf_counter() - started)
        cpu_us = (run_ns(proc.pid) - ran) / calls / 1e3
    finally:
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    return FloorRun(samples, cpu_us)


def cpu_per_call_us(server: BenchServer, method: str, params: msgspec.Struct, calls: int) -> float:
    """The server process's CPU per call of `method`, µs, over `calls` of them."""
    ran = run_ns(server.pid)
    time_calls(server, method, params, calls)
    return (run_ns(server.pid) - ran) / calls / 1e3


def relay_latency(command: str, calls: int, warmup: int, program: Path = LATENCY_FLOOR) -> FloorRun:
    """Round trips of `command` through a bare relay (`program`)."""
    line = command.encode() + b"\n"

    def round_trip(to: IO[bytes], back: IO[bytes]) -> None:
        to.write(line)
        to.flush()
        if back.readline() != b"0\n":
            raise RuntimeError(f"the latency floor's `{command}` failed")

    return floor_latency([sys.executable, str(program)], round_trip, calls, warmup)


def loop_latency(calls: int, warmup: int, module: str = "bench.loopfloor") -> FloorRun:
    """`bash` requests answered by the loop floor (`loopfloor.py`), or another
    served the same way (`module`), sent and read back as the bench's client
    does the server's."""
    core = ClientCore()
    params = BashParams(command="true")

    def round_trip(to: IO[bytes], back: IO[bytes]) -> None:
        ident, line = core.request("bash", params)
        to.write(line)
        to.flush()
        [reply] = core.line(back.readline())
        if isinstance(reply, Unparsable) or reply.id != ident:
            raise RuntimeError(f"{module} answered something else")

    return floor_latency([sys.executable, "-m", module], round_trip, calls, warmup, cwd=ROOT)


def bash_fork_exec_seconds(loops: int) -> float:
    """Seconds per `/bin/true` run by a bash's own fork and exec, from `time`
    of a loop of them inside one bash (its start not counted)."""
    script = f"TIMEFORMAT=%R; time for ((i = 0; i < {loops}; i++)); do /bin/true; done"
    proc = subprocess.run([*BARE_BASH, "-c", script], capture_output=True, text=True, check=True)
    return float(proc.stderr.strip().splitlines()[-1]) / loops


def start_seconds(argv: list[str]) -> float:
    """Seconds from spawning `argv` to its exit."""
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - started


# Run by the interpreter of the install it compiles (any version of it).
_COMPILE = """
import compileall, importlib.util
for name in ("bashrpc", "bashrpc.server", "bashrpc.protocol"):
    for location in importlib.util.find_spec(name).submodule_search_locations:
        compileall.compile_dir(location, quiet=1)
"""


def compile_server(python: str = sys.executable) -> None:
    """Byte-compile the server's modules of `python`'s install, as an install
    does: with PYTHONDONTWRITEBYTECODE set (or a fresh checkout), every start
    would otherwise compile them all, and startup would measure the compiler."""
    subprocess.run([python, "-c", _COMPILE], check=True, stdout=subprocess.DEVNULL)


def startup_floors() -> dict[str, float]:
    """One run of each startup floor, in seconds."""
    return {
        "interpreter": start_seconds([sys.executable, "-c", "pass"]),
        "imports": start_seconds([sys.executable, "-c", f"import {SERVER_MAIN}"]),
        "bash": start_seconds([*BARE_BASH, "-c", "true"]),
    }


class LatencyFloors:
    """The latency rows measured against the floors, one value per repetition."""

    def __init__(self) -> None:
        self.relay_true = Row("latency", "floor: bare relay `true` p50", "ms")
        self.relay_fork = Row("latency", "floor: bare relay `/bin/true` p50", "ms")
        self.driver = Row(
            "latency", "floor: the server's shell protocol by a bare relay, `true` p50", "ms"
        )
        self.driver_fork = Row(
            "latency", "floor: the server's shell protocol by a bare relay, `/bin/true` p50", "ms"
        )
        self.loop = Row(
            "latency",
            "floor: the same protocol served under uvloop, JSON-RPC in and out, `true` p50",
            "ms",
        )
        self.tasks = Row(
            "latency",
            "floor: the same, in request tasks of a task group (cancel scope, event), `true` p50",
            "ms",
        )
        self.fork_exec = Row("latency", "floor: bash's own fork+exec of `/bin/true`", "ms")
        self.loop_cpu = Row("latency", "floor: the loop floor's CPU per `true`", "µs")
        self.tasks_cpu = Row("latency", "floor: the structured floor's CPU per `true`", "µs")
        self.server_cpu = Row("latency", "server CPU per `true` (its process)", "µs")
        # The work itself, wherever it ran: what a faster request path must cut.
        self.over_tasks_cpu = Row("latency", "server CPU per `true` / the structured floor's", "×")
        self.ping = Row("latency", "floor: server `ping` p50 (its hop, no shell)", "ms")
        self.true_ratio = at_most("latency", "bash `true` / relay floor (p50)", "×", 1.5)
        self.true_above = Row("latency", "bash `true` p50 minus (relay floor + `ping`)", "ms")
        # What the server's Python adds to bash's share of its own protocol.
        self.python_share = Row("latency", "bash `true` p50 minus (protocol floor + `ping`)", "ms")
        # What the server's own per-command work costs, beyond any loop's.
        self.own_work = Row("latency", "bash `true` p50 minus the loop floor", "ms")
        # What its features cost per command, beyond the shape it must have.
        self.features = Row("latency", "bash `true` p50 minus the structured floor", "ms")
        self.over_tasks = Row("latency", "bash `true` / structured floor (p50)", "×")
        # The targets this design can defend (see the benchmarks page).
        self.true_design = at_most(
            "latency", "bash `true` / (protocol floor + `ping`) (p50)", "×", 1.5, proposed=True
        )
        self.fork_extra = Row(
            "latency", "server's `/bin/true` minus `true`, minus the relay's (p50)", "ms"
        )
        # What a fork costs bash in the server's protocol beyond the bare relay's
        # (the protocol's share, no server in it), and the server's beyond that.
        self.driver_fork_extra = Row(
            "latency", "floor: protocol's `/bin/true` minus `true`, minus the relay's (p50)", "ms"
        )
        self.fork_design = at_most(
            "latency",
            "server's `/bin/true` minus `true`, minus the protocol floor's (p50)",
            "ms",
            0.15,
            proposed=True,
        )
        self.fork_above = at_most(
            "latency", "bash `/bin/true` p50 minus (relay floor + fork+exec)", "ms", 0.15
        )
        self.driver_fork_above = Row(
            "latency",
            "floor: protocol's `/bin/true` p50 minus (relay floor + fork+exec)",
            "ms",
        )

    def measure(self, sizes: Sizes, server: Caller) -> None:
        """One repetition of the floors; `server` is asked for its `ping`."""
        calls, warmup = sizes.latency_calls, sizes.warmup_calls
        for row, command in ((self.relay_true, "true"), (self.relay_fork, "/bin/true")):
            relayed = relay_latency(command, calls, warmup).samples
            row.values.append(percentile(relayed, 0.5) * 1e3)
        for row, command in ((self.driver, "true"), (self.driver_fork, "/bin/true")):
            driven = relay_latency(command, calls, warmup, DRIVER_FLOOR).samples
            row.values.append(percentile(driven, 0.5) * 1e3)
        loop = loop_latency(calls, warmup)
        self.loop.values.append(percentile(loop.samples, 0.5) * 1e3)
        self.loop_cpu.values.append(loop.cpu_us)
        tasks = loop_latency(calls, warmup, "bench.taskfloor")
        self.tasks.values.append(percentile(tasks.samples, 0.5) * 1e3)
        self.tasks_cpu.values.append(tasks.cpu_us)
        self.fork_exec.values.append(bash_fork_exec_seconds(sizes.fork_loops) * 1e3)
        time_calls(server, "ping", EmptyParams(), warmup)
        pings = time_calls(server, "ping", EmptyParams(), calls)
        self.ping.values.append(percentile(pings, 0.5) * 1e3)

    def compare(self, true_p50: float, fork_p50: float, true_cpu_us: float) -> None:
        """The server's p50s and its CPU per `true` of this repetition against its floors."""
        self.server_cpu.values.append(true_cpu_us)
        floor_cpu = self.tasks_cpu.values[-1]
        # A floor too quick for the ticks of a kernel without `schedstat` reads 0.
        self.over_tasks_cpu.values.append(true_cpu_us / floor_cpu if floor_cpu else math.nan)
        relay = self.relay_true.values[-1]
        self.true_ratio.values.append(true_p50 / relay)
        self.true_above.values.append(true_p50 - relay - self.ping.values[-1])
        self.python_share.values.append(true_p50 - self.driver.values[-1] - self.ping.values[-1])
        self.own_work.values.append(true_p50 - self.loop.values[-1])
        self.features.values.append(true_p50 - self.tasks.values[-1])
        self.over_tasks.values.append(true_p50 / self.tasks.values[-1])
        self.fork_above.values.append(fork_p50 - relay - self.fork_exec.values[-1])
        self.true_design.values.append(true_p50 / (self.driver.values[-1] + self.ping.values[-1]))
        relay_fork = self.relay_fork.values[-1] - relay
        self.fork_extra.values.append(fork_p50 - true_p50 - relay_fork)
        driver_fork = self.driver_fork.values[-1] - self.driver.values[-1]
        self.driver_fork_extra.values.append(driver_fork - relay_fork)
        self.fork_design.values.append(fork_p50 - true_p50 - driver_fork)
        self.driver_fork_above.values.append(
            self.driver_fork.values[-1] - relay - self.fork_exec.values[-1]
        )

    def rows(self) -> list[Row]:
        return [
            self.relay_true,
            self.relay_fork,
            self.driver,
            self.driver_fork,
            self.loop,
            self.tasks,
            self.fork_exec,
            self.ping,
            self.true_ratio,
            self.true_above,
            self.python_share,
            self.own_work,
            self.features,
            self.over_tasks,
            self.loop_cpu,
            self.tasks_cpu,
            self.server_cpu,
            self.over_tasks_cpu,
            self.true_design,
            self.fork_above,
            self.driver_fork_above,
            self.fork_extra,
            self.driver_fork_extra,
            self.fork_design,
        ]


# Startup's target: this, or 1.3× its floor where the floor itself is above 75 ms.
STARTUP_TARGET_MS = 100.0
STARTUP_FLOOR_RATIO = 1.3
STARTUP_HIGH_FLOOR_MS = 75.0


class StartupFloors:
    """Startup split into the interpreter, the server's imports and the rest,
    each floor run beside each start."""

    def __init__(self) -> None:
        self.interpreter = Row("startup", "floor: `python -c pass`", "ms")
        self.imports = Row("startup", f"floor: `python -c 'import {SERVER_MAIN}'`", "ms")
        self.bash = Row("startup", "floor: one `bash` start", "ms")
        self.floor = Row("startup", "floor: interpreter + one `bash` start", "ms")
        self.import_cost = Row("startup", "imports (import floor minus `python -c pass`)", "ms")
        self.rest = Row("startup", "the rest (startup minus import floor minus `bash`)", "ms")
        self.ratio = Row("startup", "startup (empty HOME) / floor", "×")
        # The target the imports leave room for (see the benchmarks page).
        self.over_imports = at_most(
            "startup",
            "startup (empty HOME) / (import floor + one `bash` start)",
            "×",
            1.3,
            proposed=True,
        )

    def targeted(self, row: Row) -> Row:
        """`row`, the start to the first result, with its target against this floor."""
        row.target = (
            f"≤ {STARTUP_TARGET_MS:g}, or ≤ {STARTUP_FLOOR_RATIO}× a floor"
            f" above {STARTUP_HIGH_FLOOR_MS:g}"
        )
        row.check = self._meets
        return row

    def measure(self, startup_ms: float) -> None:
        """One run of each floor, beside one start that took `startup_ms`."""
        floors = {name: seconds * 1e3 for name, seconds in startup_floors().items()}
        self.interpreter.values.append(floors["interpreter"])
        self.imports.values.append(floors["imports"])
        self.bash.values.append(floors["bash"])
        floor = floors["interpreter"] + floors["bash"]
        self.floor.values.append(floor)
        self.import_cost.values.append(floors["imports"] - floors["interpreter"])
        self.rest.values.append(startup_ms - floors["imports"] - floors["bash"])
        self.ratio.values.append(startup_ms / floor)
        self.over_imports.values.append(startup_ms / (floors["imports"] + floors["bash"]))

    def _meets(self, startup_ms: float) -> bool:
        floor = self.floor.median
        if floor > STARTUP_HIGH_FLOOR_MS:
            return startup_ms <= STARTUP_FLOOR_RATIO * floor
        return startup_ms <= STARTUP_TARGET_MS

    def rows(self) -> list[Row]:
        return [
            self.interpreter,
            self.imports,
            self.bash,
            self.floor,
            self.import_cost,
            self.rest,
            self.ratio,
            self.over_imports,
        ]
