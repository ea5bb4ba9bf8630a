"""The benchmark harness itself runs (tiny sizes) and writes its table as JSON."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.methods import BashParams
from bench.ab import Figure
from bench.client import BenchServer, time_interleaved
from bench.stageclock import PROBES, Clock
from tests.rpc import server_environment

ROOT = Path(__file__).resolve().parents[2]


def run_bench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, module: str = "bench"
) -> subprocess.CompletedProcess[str]:
    """`python -m bench ...` (or another bench `module`) from the checkout, as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


@pytest.mark.slow
def test_quick_bench_writes_json(tmp_path: Path) -> None:
    proc = run_bench("--quick", "--out", str(tmp_path), env=server_environment(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| case | metric |")
    data = json.loads((tmp_path / "quick.json").read_text())
    cases = {row["case"] for row in data["rows"]}
    assert cases == {
        "latency",
        "startup",
        "throughput",
        "memory",
        "first chunk",
        "concurrency",
        "throttle",
        "interceptor",
        "sandbox",
        "fairness",
        "daemon",
        "redaction",
        "network",
        "input",
    }
    measured = [row for row in data["rows"] if row["values"]]
    # A difference of two medians ("difference", "on - off", "minus direct", "CPU
    # added / …") may come out below zero on a noisy machine; CPU counted in clock
    # ticks may be 0 at quick sizes.
    differences = ("difference", " - ", "minus", "added")
    positive = [row for row in measured if not any(d in row["metric"] for d in differences)]
    zero_or_below = [
        (row["case"], row["metric"], row["median"])
        for row in positive
        if not (
            row["median"] > 0
            or row["unit"] == "KiB"
            or (row["median"] == 0 and "CPU" in row["metric"])
        )
    ]
    assert zero_or_below == []
    # The streamed floor ran, byte for byte (a relay that loses bytes fails the run).
    floors = [row for row in measured if "streamed" in row["metric"] and "floor" in row["metric"]]
    assert len(floors) == 6  # its MB/s and two ratios, for zeros and for seq
    # Latency and startup ran beside their floors, each a row with a value.
    metrics = {row["metric"] for row in measured}
    assert {
        "floor: bare relay `true` p50",
        "floor: bare relay `/bin/true` p50",
        "floor: bash's own fork+exec of `/bin/true`",
        "floor: the server's shell protocol by a bare relay, `true` p50",
        "floor: the server's shell protocol by a bare relay, `/bin/true` p50",
        "baseline: spawn-per-call `/bin/true` p50",
        "bash `/bin/true` / spawn-per-call `/bin/true`",
        "server's `/bin/true` minus `true`, minus the protocol floor's (p50)",
        "floor: the same protocol served under uvloop, JSON-RPC in and out, `true` p50",
        "floor: the same, in request tasks of a task group (cancel scope, event), `true` p50",
        "bash `true` / structured floor (p50)",
        "floor: the structured floor's CPU per `true`",
        "server CPU per `true` / the structured floor's",
        "floor: `python -c pass`",
        "floor: one `bash` start",
        "bash `true` / relay floor (p50)",
        "startup (empty HOME) / floor",
    } <= metrics
    # The throttle's trickle ran, on the machine as it is and beside a burner.
    trickles = [row for row in measured if row["metric"].startswith("trickle")]
    assert len(trickles) == 4
    flood = next(row for row in measured if row["metric"].startswith("flood: `seq"))
    assert flood["target"] == "≥ 32"
    swerex = next(row for row in data["rows"] if "SWE-ReX" in row["metric"])
    assert swerex["values"] or "skipped" in swerex["note"]


@pytest.mark.slow
def test_peers_are_skipped_with_a_note_when_npm_is_missing(tmp_path: Path) -> None:
    """bashrpc is still measured; each peer says why it was not."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "head", "tr", "wc", "sleep", "true", "env"):
        found = shutil.which(tool)
        assert found is not None
        (tools / tool).symlink_to(found)
    env = {
        **server_environment(tmp_path),
        "PATH": str(tools),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = run_bench("--quick", "--only", "interceptor", "--peers", "--out", str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "| metric | bashrpc |" in proc.stdout
    peers = json.loads((tmp_path / "quick.json").read_text())["peers"]
    # Streaming and kept, each checked byte for byte.
    assert peers["systems"] == ["bashrpc", "bashrpc kept"]
    for system in peers["systems"]:
        assert peers["results"][system]["`true` p50 ms"] > 0
        assert peers["results"][system]["zeros byte-exact"] == 1
    # Then a note on the plot, where matplotlib (an optional extra) is missing.
    assert peers["notes"][:2] == [
        "pi skipped: node and npm are not installed (apt install nodejs npm)",
        "omp skipped: node and npm are not installed (apt install nodejs npm)",
    ]


@pytest.mark.slow
def test_a_run_leaves_the_committed_results_alone(tmp_path: Path) -> None:
    """`--only` (a README example) writes to the cache; only `--record` writes
    the committed results, and only for a full run."""
    committed = ROOT / "bench" / "results" / "latest.json"
    before = committed.read_bytes()
    env = {**server_environment(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_bench("--only", "interceptor", "--repeat", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert committed.read_bytes() == before
    cached = json.loads(
        (tmp_path / "cache" / "bashrpc-bench" / "results" / "latest.json").read_text()
    )
    assert {row["case"] for row in cached["rows"]} == {"interceptor"}
    partial = run_bench("--record", "--only", "interceptor", env=env, timeout=60)
    assert partial.returncode == 2 and "--record" in partial.stderr
    assert committed.read_bytes() == before


def test_an_interleaved_before_and_after_names_every_side(tmp_path: Path) -> None:
    """`bench.ab` runs two installs' servers side by side (here one install, twice)."""
    out = tmp_path / "ab.json"
    sides = [f"before={sys.executable}", f"after={sys.executable}"]
    sizes = ["--blocks", "2", "--calls", "5", "--startups", "1"]
    proc = run_bench(
        *sides,
        *sizes,
        "--json",
        str(out),
        env=server_environment(tmp_path),
        timeout=120,
        module="bench.ab",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("| metric | before | after | after / before | unit |")
    figures = msgspec.json.decode(out.read_bytes(), type=list[Figure])
    assert [f.metric for f in figures] == [
        "bash `true` p50",
        "bash `true` p10",
        "bash `true` p90",
        "bash `echo hi` p50",
        "bash `echo hi` p10",
        "bash `echo hi` p90",
        "tools/call `true` p50",
        "tools/call `true` p10",
        "tools/call `true` p90",
        "startup to first result, empty HOME (median)",
    ]
    assert all(set(f.values) == {"before", "after"} for f in figures)
    assert all(v > 0 for f in figures for v in f.values.values())
    assert figures[0].lower_in["after"] in {"0 of 2", "1 of 2", "2 of 2"}


def test_an_interleaved_run_refuses_a_side_without_its_interpreter() -> None:
    proc = run_bench("before=", "after=x", timeout=60, module="bench.ab")
    assert proc.returncode == 2
    assert "'before=': expected NAME=PYTHON" in proc.stderr


@pytest.mark.slow
def test_the_stage_clock_finds_every_probe_on_a_calls_way(tmp_path: Path) -> None:
    """Its probes name the server's functions: one renamed or moved off the way
    of a call stops the clock, here rather than when someone needs it."""
    for method in ("bash", "tools/call"):
        args = ("--calls", "20", "--method", method, "--json")
        proc = run_bench(*args, env=server_environment(tmp_path), module="bench.stageclock")
        assert proc.returncode == 0, proc.stderr
        clock = msgspec.json.decode(proc.stdout, type=Clock)
        assert clock.calls == 20
        assert [(s.start, s.end) for s in clock.stages] == list(
            itertools.pairwise(p.label for p in PROBES)
        )
        assert all(stage.median_us > 0 for stage in clock.stages)


def test_interleaved_calls_take_turns_in_blocks_whose_order_flips(tmp_path: Path) -> None:
    """Two kinds of call, each appending its letter to one file, in blocks of 3:
    the file shows the turns, and each kind got all its calls timed."""
    log = tmp_path / "turns"
    kinds = [("bash", BashParams(command=f"printf {letter} >> {log}")) for letter in "ab"]
    server = BenchServer(tmp_path / "artifacts", env=server_environment(tmp_path))
    try:
        samples = time_interleaved(server, kinds, 8, block=3)
    finally:
        server.close()
    assert log.read_text() == "aaabbb" + "bbbaaa" + "aabb"
    assert [len(each) for each in samples] == [8, 8]
    assert all(seconds > 0 for each in samples for seconds in each)
