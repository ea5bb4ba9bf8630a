"""Redaction's cost: the same runs with 100 registered secrets and the default
token formats, and with redaction off (no secret variables, no formats).

Each repetition runs both configurations back to back, so the ratios compare
runs under the same load; the targets are issue 44's.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

from bashrpc.protocol.mcp import BashToolArguments
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams, SecretsAddParams, SecretValue
from bashrpc.server.output.redact import SecretTable
from bashrpc.server.output.secretforms import DEFAULT_FORMATS
from bench.client import BenchServer, cpu_seconds, time_calls
from bench.rows import MB, Row, at_least, at_most, percentile
from bench.workbench import Workbench

REGISTERED = 100
# The matcher's floor: its one pass over this much of `seq`'s output, in reads of
# the size a flood's pipe mostly gives the server.
FLOOR_COUNT = 2_000_000
FLOOR_READ = 4096
OFF = "[secrets]\nenv = []\npatterns = false\n"
FIRST_CHUNK_COMMAND = "echo start; sleep 0.2"


def _values() -> list[SecretValue]:
    return [
        SecretValue(name=f"SECRET_{i}", value=secrets.token_urlsafe(24)) for i in range(REGISTERED)
    ]


def _server(bench: Workbench, redacting: bool) -> BenchServer:
    config = bench.workdir / ("redacting.toml" if redacting else "plain.toml")
    config.write_text("" if redacting else OFF)
    server = BenchServer(bench.artifacts, "--config", str(config))
    if redacting:
        server.call("secrets/add", SecretsAddParams(secrets=_values()))
    server.call("bash", BashParams(command="true"))
    return server


def _rows() -> dict[str, Row]:
    names = {
        "streamed": ("seq streamed (bash)", "MB/s"),
        "kept": ("seq kept, not streamed (tools/call)", "MB/s"),
        "true": ("bash `true` p50", "ms"),
        "first": (f"`{FIRST_CHUNK_COMMAND}` to first bash/chunk", "ms"),
        # The server's own CPU: steadier than MB/s on a machine shared with other load.
        "streamed cpu": ("seq streamed: server CPU per MB", "ms/MB"),
        "kept cpu": ("seq kept: server CPU per MB", "ms/MB"),
    }
    rows = {}
    for key, (metric, unit) in names.items():
        for mode in ("off", "on"):
            rows[f"{key} {mode}"] = Row("redaction", f"{metric}, redaction {mode}", unit)
    rows["streamed ratio"] = at_least("redaction", "seq streamed: on / off", "×", 0.95)
    rows["kept ratio"] = at_least("redaction", "seq kept: on / off", "×", 0.95)
    rows["cpu ratio"] = Row("redaction", "seq streamed: server CPU on / off", "×")
    rows["kept cpu ratio"] = Row("redaction", "seq kept: server CPU on / off", "×")
    rows["kept added"] = Row("redaction", "seq kept: server CPU added per MB (on - off)", "ms/MB")
    rows["floor"] = Row(
        "redaction",
        f"the table's scan alone, CPU per MB ({FLOOR_READ} B reads, one matcher pass each)",
        "ms/MB",
    )
    # A pass over every byte is the least redaction can cost; the rest is the
    # redactor's own code, and that is what the target holds.
    rows["floor ratio"] = at_most(
        "redaction", "seq kept: CPU added / the table's scan alone", "×", 1.5
    )
    rows["true difference"] = Row("redaction", "bash `true` p50: on - off", "ms")
    rows["first difference"] = Row("redaction", "first chunk: on - off", "ms")
    return rows


def _measure(bench: Workbench, redacting: bool, size: int, rows: dict[str, Row]) -> None:
    s = bench.sizes
    mode = "on" if redacting else "off"
    command = f"seq 1 {s.seq_count}"
    server = _server(bench, redacting)
    try:
        for key, method, params in (
            ("streamed", "bash", BashParams(command=command)),
            ("kept", "tools/call", bash_tool_call(BashToolArguments(command=command))),
        ):
            cpu = cpu_seconds(server.pid)
            started = time.perf_counter()
            server.call(method, params)
            rows[f"{key} {mode}"].values.append(size / (time.perf_counter() - started) / MB)
            rows[f"{key} cpu {mode}"].values.append(
                (cpu_seconds(server.pid) - cpu) * 1e3 / (size / MB)
            )
        samples = time_calls(server, "bash", BashParams(command="true"), s.latency_calls)
        rows[f"true {mode}"].values.append(percentile(samples, 0.5) * 1e3)
        firsts: list[float] = []
        for _ in range(s.first_chunk_runs):
            server.first_notification_at = None
            started = time.perf_counter()
            server.call("bash", BashParams(command=FIRST_CHUNK_COMMAND))
            assert server.first_notification_at is not None
            firsts.append((server.first_notification_at - started) * 1e3)
        rows[f"first {mode}"].values.append(percentile(firsts, 0.5))
    finally:
        server.close()
    for path in Path(bench.artifacts).rglob("*.bash.log"):
        path.unlink()


def redaction(bench: Workbench) -> list[Row]:
    rows = _rows()
    size = _seq_size(bench.sizes.seq_count)
    # Twice the usual repetitions: the ratios are of two noisy figures.
    for _ in range(2 * bench.sizes.repeat):
        for redacting in (False, True):
            _measure(bench, redacting, size, rows)
        for key in ("streamed", "kept"):
            rows[f"{key} ratio"].values.append(
                rows[f"{key} on"].values[-1] / rows[f"{key} off"].values[-1]
            )
        for key, ratio in (("streamed cpu", "cpu ratio"), ("kept cpu", "kept cpu ratio")):
            off = rows[f"{key} off"].values[-1]
            # Quick sizes can take less CPU than the clock's tick shows: no ratio then.
            if off > 0:
                rows[ratio].values.append(rows[f"{key} on"].values[-1] / off)
        for key in ("true", "first"):
            rows[f"{key} difference"].values.append(
                rows[f"{key} on"].values[-1] - rows[f"{key} off"].values[-1]
            )
        added = rows["kept cpu on"].values[-1] - rows["kept cpu off"].values[-1]
        rows["kept added"].values.append(added)
        rows["floor"].values.append(floor := _matcher_pass())
        rows["floor ratio"].values.append(added / floor)
    return list(rows.values())


def _matcher_pass() -> float:
    """CPU ms per MB of the table's scan of `seq`'s output read by read (one
    matcher pass, and the check of its end), with 100 values like the server's
    and the default formats: the least a redacting stream costs."""
    table = SecretTable([(v.name, v.value.encode()) for v in _values()], DEFAULT_FORMATS)
    counted = subprocess.run(["seq", "1", str(FLOOR_COUNT)], capture_output=True, check=True)
    data = counted.stdout
    reads = [data[at : at + FLOOR_READ] for at in range(0, len(data), FLOOR_READ)]
    started = time.process_time()
    for read in reads:
        table.quiet(read)
    return (time.process_time() - started) * 1e3 / (len(data) / MB)


def _seq_size(count: int) -> int:
    """Bytes of `seq 1 count`'s output (the figures' MB)."""
    counted = subprocess.run(
        ["bash", "-c", f"seq 1 {count} | wc -c"], capture_output=True, check=True, text=True
    )
    return int(counted.stdout)
