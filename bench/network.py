"""The network allowlist's cost: the proxy's added time to first byte and its
throughput against a direct connection on loopback (the proxy's own code,
`bench/netproxy.py`, in a process of its own), and a command's latency in a
sandboxed session with the allowlist against one with the network off (the
proxy should cost nothing while unused)."""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bashrpc.server.runtime.sandbox.bwrap import probe as sandbox_probe
from bench.client import BenchServer, warm_and_first_true
from bench.rows import MB, Row, at_least, at_most, percentile
from bench.workbench import Workbench

NETPROXY = Path(__file__).with_name("netproxy.py")
RELAY_FLOOR = Path(__file__).with_name("relayfloor.py")
NAME = "origin.example.org"
FILE = "blob"
# What the time to first byte fetches: small, so no earlier response still
# streams (through the proxy, or to a client gone) while the next is timed.
SMALL = "small"
START_SECONDS = 10.0
# Downloads each way per repetition (the origin's own pace varies run to run).
DOWNLOADS = 3


def network(bench: Workbench) -> list[Row]:
    return _proxy_rows(bench) + _latency_rows(bench)


def _proxy_rows(bench: Workbench) -> list[Row]:
    s = bench.sizes
    direct_ttfb = Row("network", "time to first byte, direct p50", "ms")
    proxy_ttfb = Row("network", "time to first byte, through the proxy p50", "ms")
    added = at_most("network", "proxy's added time to first byte (p50 difference)", "ms", 2)
    direct_rate = Row("network", f"{s.network_megabytes} MB download, direct", "MB/s")
    proxy_rate = Row("network", f"{s.network_megabytes} MB download, through the proxy", "MB/s")
    floor_rate = Row(
        "network", f"{s.network_megabytes} MB download, through a bare splice relay", "MB/s"
    )
    ratio = Row("network", "download: proxy / direct", "×")
    # A second loopback hop is what a proxy cannot avoid: it is measured against
    # the least a relay can do (`relayfloor.py`), its own code's cost alone.
    floor_ratio = at_least("network", "download: proxy / bare relay", "×", 0.8)
    with (
        tempfile.TemporaryDirectory() as site,
        _origin(Path(site), s.network_megabytes) as port,
        _proxy(port) as proxy_port,
        _started([sys.executable, str(RELAY_FLOOR), str(port)], str) as floor_port,
    ):
        direct, proxied = _requests(port, "127.0.0.1", FILE), _requests(proxy_port, NAME, FILE)
        relayed = _requests(floor_port, "127.0.0.1", FILE)
        small = _requests(port, "127.0.0.1", SMALL), _requests(proxy_port, NAME, SMALL)
        for _ in range(s.repeat):
            d = percentile([_first_byte(*small[0]) for _ in range(s.network_requests)], 0.5)
            p = percentile([_first_byte(*small[1]) for _ in range(s.network_requests)], 0.5)
            direct_ttfb.values.append(d * 1e3)
            proxy_ttfb.values.append(p * 1e3)
            added.values.append((p - d) * 1e3)
            # Alternated, so a busy moment of the machine falls on each alike.
            runs = [
                (_download(*direct), _download(*proxied), _download(*relayed))
                for _ in range(DOWNLOADS)
            ]
            rate_d, rate_p, rate_f = (statistics.median(way) for way in zip(*runs, strict=True))
            direct_rate.values.append(rate_d)
            proxy_rate.values.append(rate_p)
            floor_rate.values.append(rate_f)
            ratio.values.append(rate_p / rate_d)
            floor_ratio.values.append(rate_p / rate_f)
    return [direct_ttfb, proxy_ttfb, added, direct_rate, proxy_rate, floor_rate, ratio, floor_ratio]


def _latency_rows(bench: Workbench) -> list[Row]:
    s = bench.sizes
    _, problem = sandbox_probe()
    if problem is not None:
        return [Row("network", "allowlist cost", "ms", note=f"skipped: {problem}")]
    rows: dict[str, Row] = {}
    starts: dict[str, Row] = {}
    for mode in ("off", "allowlist"):
        row = Row("network", f"bash `true` p50, workspace-write, network {mode}", "ms")
        start = Row("network", f"new session's first `true`, network {mode}", "ms")
        rows[mode], starts[mode] = row, start
        config = bench.workdir / f"network-{mode}.toml"
        config.write_text(
            f'[sandbox]\nmode = "workspace-write"\n[sandbox.network]\nmode = "{mode}"\n'
            f'allow = ["{NAME}"]\n'
        )
        for _ in range(s.repeat):
            server = BenchServer(bench.artifacts, "--config", str(config))
            try:
                p50, first = warm_and_first_true(
                    server,
                    warmup=s.warmup_calls,
                    calls=s.latency_calls,
                    sessions=s.sandbox_sessions,
                )
                row.values.append(p50)
                start.values.append(first)
            finally:
                server.close()
    ratio = at_most("network", "bash `true` p50: allowlist / network off", "×", 1.1)
    ratio.values = [
        a / o for a, o in zip(rows["allowlist"].values, rows["off"].values, strict=True)
    ]
    return [rows["off"], rows["allowlist"], ratio, starts["off"], starts["allowlist"]]


def _requests(port: int, host: str, path: str) -> tuple[int, bytes]:
    """Where to send a GET of `path`, and the request: origin form to the origin,
    absolute to the proxy."""
    target = f"/{path}" if host == "127.0.0.1" else f"http://{host}/{path}"
    return port, f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


def _first_byte(port: int, request: bytes) -> float:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.perf_counter()
        sock.sendall(request)
        sock.recv(1)
        return time.perf_counter() - started


def _download(port: int, request: bytes) -> float:
    """MB/s of the whole response, read to its end."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.perf_counter()
        sock.sendall(request)
        total = 0
        while data := sock.recv(1 << 20):
            total += len(data)
        return total / MB / (time.perf_counter() - started)


@contextmanager
def _origin(site: Path, megabytes: int) -> Iterator[int]:
    """A static server on loopback holding a file of `megabytes`."""
    with open(site / FILE, "wb") as blob:
        blob.truncate(megabytes * MB)
    (site / SMALL).write_bytes(b"x")
    argv = [sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"]
    # Its log is a line per request, and a traceback per connection the time to
    # first byte closes early: none of it the bench's.
    with _started([*argv, "--directory", str(site)], _served_port, log=False) as port:
        yield port


def _served_port(line: str) -> str:
    """`http.server`'s first line: "Serving HTTP on 127.0.0.1 port N (...) ..."."""
    return line.split(" port ")[1]


@contextmanager
def _proxy(origin_port: int) -> Iterator[int]:
    with _started([sys.executable, str(NETPROXY), str(origin_port)], str) as port:
        yield port


@contextmanager
def _started(argv: list[str], port_of: Callable[[str], str], *, log: bool = True) -> Iterator[int]:
    """A process that prints a line naming its port first; its stderr ours, or
    (`log=False`) discarded."""
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=None if log else subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).parents[1],
    )
    try:
        assert process.stdout is not None
        yield int(port_of(process.stdout.readline()).split()[0])
    finally:
        process.kill()
        process.wait(START_SECONDS)
