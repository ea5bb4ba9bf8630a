"""The throttle on `bash/chunk`: rows that measure it, not the producer.

A flood is cut by size (a full batch goes at once), so its notifications per
second say how fast the producer is; what the throttle owes a flood is large
notifications. A trickle, a short line every millisecond for a few seconds, is
what the interval alone holds back: at most one notification per interval
(plus the first, which goes at once). The trickle runs twice: on the machine
as it is, and beside a CPU burner, where a timer that fires late must still
not send more.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

from bashrpc.protocol.methods import BashParams
from bench.client import BenchServer
from bench.rows import Row, at_least, at_most
from bench.workbench import Workbench

# A short line every millisecond, for as long as it is told; the first from
# bash itself, so the first chunk is timed from a line and not from a Python start.
TRICKLE = (
    "import sys, time\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end:\n"
    "    print('tick', flush=True)\n"
    "    time.sleep(0.001)\n"
)
# The flood's lines per line of the echo loop: enough to be cut by size many times over.
FLOOD_LINES_PER_WRITE = 10
BURNER = ("bash", "--noprofile", "--norc", "-c", "while :; do :; done")


def throttle(bench: Workbench) -> list[Row]:
    return flood_rows(bench) + trickle_rows(bench, loaded=False) + trickle_rows(bench, loaded=True)


def flood_rows(bench: Workbench) -> list[Row]:
    """Many small writes (an `echo` loop: one write per line) and a flood (`seq`,
    written in blocks): both coalesced; the flood is cut by size alone."""
    n = bench.sizes.small_writes
    seconds = Row("throttle", f"small writes: {n} echo lines: time", "s")
    count = Row("throttle", f"small writes: {n} echo lines: notifications sent", "")
    echo_size = Row("throttle", "small writes: KiB per notification", "KiB")
    flood = f"seq {n * FLOOD_LINES_PER_WRITE}"
    flood_size = at_least("throttle", f"flood: `{flood}`: KiB per notification", "KiB", 32)
    for _ in range(bench.sizes.repeat):
        server = BenchServer(bench.artifacts)
        try:
            server.call("bash", BashParams(command="true"))
            started = time.perf_counter()
            notifications, kib = _kib_per_notification(
                server, f"for i in $(seq {n}); do echo $i; done"
            )
            seconds.values.append(time.perf_counter() - started)
            count.values.append(notifications)
            echo_size.values.append(kib)
            flood_size.values.append(_kib_per_notification(server, flood)[1])
        finally:
            server.close()
    return [seconds, count, echo_size, flood_size]


def _kib_per_notification(server: BenchServer, command: str) -> tuple[int, float]:
    """The notifications `command` sent, and the KiB of text each carried."""
    text = 0

    def count_text(chunk: bytes) -> None:
        nonlocal text
        text += len(chunk)

    server.notifications = 0
    server.on_chunk = count_text
    server.call("bash", BashParams(command=command))
    server.on_chunk = None
    return server.notifications, text / 1024 / server.notifications


def trickle_rows(bench: Workbench, *, loaded: bool) -> list[Row]:
    seconds = bench.sizes.trickle_seconds
    name = f"trickle{', loaded' if loaded else ''}"
    rate = at_most(
        "throttle", f"{name}: a line per ms for {seconds:g} s, notifications per second", "/s", 60
    )
    first = at_most("throttle", f"{name}: first chunk", "ms", 50)
    command = f"echo start; exec {shlex.join([sys.executable, '-c', TRICKLE, str(seconds)])}"
    for _ in range(bench.sizes.repeat):
        burner = subprocess.Popen(BURNER) if loaded else None
        server = BenchServer(bench.artifacts)
        try:
            server.call("bash", BashParams(command="true"))
            server.notifications = 0
            server.first_notification_at = None
            started = time.perf_counter()
            server.call("bash", BashParams(command=command))
            elapsed = time.perf_counter() - started
        finally:
            server.close()
            if burner is not None:
                burner.kill()
                burner.wait()
        assert server.first_notification_at is not None
        rate.values.append(server.notifications / elapsed)
        first.values.append((server.first_notification_at - started) * 1e3)
    return [rate, first]
