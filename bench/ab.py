"""Before and after, interleaved: the servers of two or more installs, alive side by side.

A change worth a few hundredths of a millisecond is smaller than the drift
between two runs on a shared machine. Here every install's server is alive at
once and takes the calls in turn, in blocks whose order alternates, so all
sides see the same drift; startups alternate the same way. Name each side by
the interpreter of a venv that has its `bashrpc` installed:

    python -m bench.ab before=../old/.venv/bin/python after=.venv/bin/python

The table gives each side's figure and its ratio to the first side's, and in
how many blocks a side's p50 was below the first's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bashrpc.protocol.mcp import BashToolArguments
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams
from bench.client import BenchServer, in_turn, startup_ms, time_calls
from bench.floors import compile_server
from bench.rows import percentile

CALLS = (
    ("bash `true`", "bash", BashParams(command="true")),
    # A command that prints: its stream's pump and a chunk's notification too.
    ("bash `echo hi`", "bash", BashParams(command="echo hi")),
    ("tools/call `true`", "tools/call", bash_tool_call(BashToolArguments(command="true"))),
)


@dataclass
class Side:
    name: str
    python: str
    samples: dict[str, list[float]] = field(default_factory=dict)
    # Each block's p50, per call: to count the blocks in which a side was lower.
    blocks: dict[str, list[float]] = field(default_factory=dict)
    startups: list[float] = field(default_factory=list)


def parse_side(text: str) -> Side:
    name, sep, python = text.partition("=")
    if not sep or not name or not python:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=PYTHON")
    return Side(name, python)


def interleaved_calls(sides: Sequence[Side], work: Path, blocks: int, calls: int) -> None:
    servers = [BenchServer(work / f"calls-{side.name}", python=side.python) for side in sides]
    try:
        for _, method, params in CALLS:
            for server in servers:
                time_calls(server, method, params, calls)
        for block in range(blocks):
            for side, server in in_turn(list(zip(sides, servers, strict=True)), block):
                for label, method, params in CALLS:
                    samples = time_calls(server, method, params, calls)
                    side.samples.setdefault(label, []).extend(samples)
                    side.blocks.setdefault(label, []).append(percentile(samples, 0.5))
    finally:
        for server in servers:
            server.close()


def interleaved_startups(sides: Sequence[Side], work: Path, runs: int) -> None:
    """Spawn to the first `bash` result, with an empty HOME (no rc to source)."""
    home = work / "home"
    home.mkdir(exist_ok=True)
    for run in range(runs):
        for side in in_turn(sides, run):
            artifacts = work / f"start-{side.name}-{run}"
            side.startups.append(startup_ms(artifacts, home=home, python=side.python))


class Figure(msgspec.Struct, frozen=True):
    metric: str
    unit: str
    values: dict[str, float]
    # Per side after the first: blocks in which its p50 was below the first side's.
    lower_in: dict[str, str] = {}


def figures(sides: Sequence[Side]) -> list[Figure]:
    first = sides[0]
    out = []
    for label, _, _ in CALLS:
        for name, fraction in (("p50", 0.5), ("p10", 0.1), ("p90", 0.9)):
            values = {s.name: percentile(s.samples[label], fraction) * 1e3 for s in sides}
            lower = {}
            if name == "p50":
                for side in sides[1:]:
                    pairs = list(zip(side.blocks[label], first.blocks[label], strict=True))
                    below = sum(mine < theirs for mine, theirs in pairs)
                    lower[side.name] = f"{below} of {len(pairs)}"
            out.append(Figure(f"{label} {name}", "ms", values, lower))
    if first.startups:
        values = {s.name: statistics.median(s.startups) for s in sides}
        out.append(Figure("startup to first result, empty HOME (median)", "ms", values))
    return out


def table(sides: Sequence[Side], rows: Sequence[Figure]) -> str:
    first, rest = sides[0].name, [s.name for s in sides[1:]]
    head = ["metric", *(s.name for s in sides), *(f"{n} / {first}" for n in rest), "unit"]
    head += [f"blocks {n} lower" for n in rest]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        cells = [row.metric, *(f"{row.values[s.name]:.3g}" for s in sides)]
        cells += [f"{row.values[n] / row.values[first]:.3f}" for n in rest]
        cells += [row.unit, *(row.lower_in.get(n, "") for n in rest)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    parser.add_argument("sides", nargs="+", type=parse_side, metavar="NAME=PYTHON")
    parser.add_argument("--blocks", type=int, default=30, help="rounds of calls (default 30)")
    parser.add_argument("--calls", type=int, default=200, help="calls per block (default 200)")
    parser.add_argument("--startups", type=int, default=20, help="starts per side (default 20)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    sides: list[Side] = args.sides
    if len(sides) < 2 or len({s.name for s in sides}) < len(sides):
        parser.error("name two or more sides, each once")
    for side in sides:
        # As an install is: otherwise a side checked out since its last compile,
        # with PYTHONDONTWRITEBYTECODE set, would compile at every start.
        compile_server(side.python)
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as work:
        interleaved_calls(sides, Path(work), args.blocks, args.calls)
        interleaved_startups(sides, Path(work), args.startups)
    rows = figures(sides)
    print(table(sides, rows))
    if args.json is not None:
        args.json.write_bytes(msgspec.json.encode(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
