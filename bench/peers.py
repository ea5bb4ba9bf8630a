"""Peers measured in the same run as bashrpc: pi and omp (oh-my-pi), over their
JSONL RPC mode (`{"id", "type": "bash", "command"}` in, a `response` with the
same id out).

`python -m bench --peers` installs them from npm into a cache folder (node and
npm from the system's packages, bun from npm for omp), once; a peer that
cannot be installed or started is skipped with a note saying why. Neither
makes a model call for `bash`; omp refuses to start without some API key, so
it is given a placeholder one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bashrpc.protocol.mcp import BashToolArguments
from bashrpc.protocol.mcpclient import bash_tool_call
from bashrpc.protocol.methods import BashParams, BashResult
from bench.client import BenchServer, file_sha256
from bench.rows import percentile

# Versions measured; newer ones may change the protocol.
PI_PACKAGE = "@earendil-works/pi-coding-agent"
OMP_PACKAGE = "@oh-my-pi/pi-coding-agent@18.2.3"
BUN_PACKAGE = "bun"
INSTALL_SECONDS = 600
ANSWER_SECONDS = 60
# A peer's full-output file is complete once it has not grown for this long.
SETTLE_SECONDS = 2.0
SETTLE_POLL_SECONDS = 0.01
# omp will not start without a model key; bash never uses it.
PLACEHOLDER_KEY = {"ANTHROPIC_API_KEY": "unused-by-bash"}


@dataclass(frozen=True)
class Peer:
    name: str
    package: str
    binary: str


PEERS = (Peer("pi", PI_PACKAGE, "pi"), Peer("omp", OMP_PACKAGE, "omp"))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bashrpc-bench" / "peers"


def install(peer: Peer, cache: Path) -> tuple[Path | None, str]:
    """The peer's executable, or None and why not."""
    folder = cache / peer.name
    executable = folder / "node_modules" / ".bin" / peer.binary
    if executable.exists():
        return executable, ""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None, "node and npm are not installed (apt install nodejs npm)"
    folder.mkdir(parents=True, exist_ok=True)
    packages = [peer.package] + ([BUN_PACKAGE] if peer.name == "omp" else [])
    try:
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--silent", *packages],
            cwd=folder,
            check=True,
            capture_output=True,
            timeout=INSTALL_SECONDS,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"npm install {' '.join(packages)} failed: {str(exc)[:200]}"
    if not executable.exists():
        return None, f"{peer.package} installed no `{peer.binary}`"
    return executable, ""


class JsonlPeer:
    """One peer process in RPC mode; `bash` requests one at a time."""

    def __init__(self, executable: Path, home: Path, workdir: Path) -> None:
        env = {
            **os.environ,
            **PLACEHOLDER_KEY,
            "HOME": str(home),
            # bun, installed beside omp, on PATH.
            "PATH": f"{executable.parent}:{os.environ.get('PATH', '')}",
        }
        self.proc = subprocess.Popen(
            [str(executable), "--mode", "rpc", "--no-session"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
            # Its own group, so closing it ends what its commands left running too.
            start_new_session=True,
        )
        self._ids = 0

    def bash(self, command: str) -> str:
        """The command's output."""
        return str(self._bash(command).get("output", ""))

    def flood(self, command: str) -> tuple[float, str | None]:
        """Seconds until the full output is there, and its sha256 as the peer
        kept it: the full-output file it names, else its answer when not
        truncated; None when neither holds it all (the bytes cannot be checked).

        pi answers before that file is complete (99.85 of 100 MB at the answer,
        the rest within a second), so the file is awaited until it stops
        growing, and the time counts until it last grew."""
        started = time.perf_counter()
        data = self._bash(command)
        elapsed = time.perf_counter() - started
        path = data.get("fullOutputPath")
        # The file first: pi may say `truncated: false` of a 100 MB flood whose
        # answer holds only the tail.
        if isinstance(path, str) and Path(path).is_file():
            elapsed = _settled(Path(path), started) or elapsed
            digest = file_sha256(Path(path))
            # The flood's copy, which the peer leaves behind in /tmp.
            Path(path).unlink()
            return elapsed, digest
        if data.get("truncated"):
            return elapsed, None
        return elapsed, hashlib.sha256(str(data.get("output", "")).encode()).hexdigest()

    def _bash(self, command: str) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._ids += 1
        ident = str(self._ids)
        request = {"id": ident, "type": "bash", "command": command}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the peer exited")
            message = json.loads(line)
            if message.get("type") == "response" and message.get("id") == ident:
                if not message.get("success", False):
                    raise RuntimeError(str(message.get("error")))
                data = message.get("data") or {}
                return data if isinstance(data, dict) else {}

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


class BashrpcPeer:
    """bashrpc behind the same interface, for the same-run comparison: `bash`
    streaming every byte, or (`kept`) a `tools/call` without progress, whose
    output stays in the artifact and a tail comes back, as the peers do."""

    def __init__(self, artifacts: Path, home: Path, *, kept: bool = False) -> None:
        self.server = BenchServer(artifacts, home=home)
        self._artifacts = artifacts
        self._kept = kept

    def bash(self, command: str) -> str:
        return self.server.result(BashResult, "bash", BashParams(command=command)).output

    def flood(self, command: str) -> tuple[float, str | None]:
        """Seconds, and the sha256 of the full output: through the stream and in
        the artifact when streamed (None unless both agree), in the artifact when kept."""
        for path in self._artifacts.rglob("*.bash.log"):
            path.unlink()
        streamed = hashlib.sha256()
        self.server.skipped_bytes = 0
        started = time.perf_counter()
        if self._kept:
            self.server.call("tools/call", bash_tool_call(BashToolArguments(command=command)))
        else:
            self.server.on_chunk = streamed.update
            self.bash(command)
            self.server.on_chunk = None
        elapsed = time.perf_counter() - started
        artifacts = list(self._artifacts.rglob("*.bash.log"))
        if len(artifacts) != 1:
            return elapsed, None
        kept = file_sha256(artifacts[0])
        # A stream that skipped (it says so) is checked through its artifact alone.
        if not self._kept and self.server.skipped_bytes == 0 and streamed.hexdigest() != kept:
            return elapsed, None
        return elapsed, kept

    def close(self) -> None:
        self.server.close()


Start = Callable[[], "JsonlPeer | BashrpcPeer"]

# The zeros figure's metric, and the one saying whether its bytes were all there.
ZEROS = "zeros through, MB/s"
EXACT = "zeros byte-exact"


def _settled(path: Path, started: float) -> float | None:
    """Wait until `path` stops growing; seconds from `started` to its last growth,
    or None if it never grew after the first look."""
    size, grew = path.stat().st_size, None
    quiet_until = time.perf_counter() + SETTLE_SECONDS
    deadline = time.perf_counter() + ANSWER_SECONDS
    while time.perf_counter() < min(quiet_until, deadline):
        time.sleep(SETTLE_POLL_SECONDS)
        now = path.stat().st_size
        if now != size:
            size, grew = now, time.perf_counter() - started
            quiet_until = time.perf_counter() + SETTLE_SECONDS
    return grew


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def measure(start: Start, calls: int, zero_bytes: str, expected: str) -> dict[str, float]:
    """The same figures for every system; `expected` is the sha256 of the zeros."""
    figures: dict[str, float] = {}
    started = time.perf_counter()
    system = start()
    try:
        system.bash("true")
        figures["startup ms"] = (time.perf_counter() - started) * 1e3
        for label, command in (("`true`", "true"), ("`/bin/true`", "/bin/true")):
            samples = [timed(functools.partial(system.bash, command)) for _ in range(calls)]
            figures[f"{label} p50 ms"] = percentile(samples, 0.5) * 1e3
            figures[f"{label} p99 ms"] = percentile(samples, 0.99) * 1e3
        figures["`sleep 30 & echo bg` ms"] = timed(lambda: system.bash("sleep 30 & echo bg")) * 1e3
        command = f"head -c {zero_bytes} /dev/zero | tr '\\0' a | wc -c"
        output = system.bash(command)
        total = int((output.split() or ["0"])[0])
        elapsed, digest = system.flood(f"head -c {zero_bytes} /dev/zero | tr '\\0' a")
        figures[ZEROS] = total / elapsed / 1e6
        # 1: every byte checked and there; 0: lost or changed, or not checkable.
        figures[EXACT] = float(digest == expected)
    finally:
        system.close()
    return figures


def compare(
    workdir: Path, calls: int, zero_bytes: str
) -> tuple[list[str], dict[str, dict[str, float]], list[str]]:
    """(systems, figures by system, notes) for bashrpc and every peer that runs here."""
    home = workdir / "peer-home"
    home.mkdir(exist_ok=True)
    reference = workdir / "zeros.out"
    subprocess.run(
        ["bash", "-c", f"head -c {zero_bytes} /dev/zero | tr '\\0' a > {reference}"], check=True
    )
    expected = file_sha256(reference)
    reference.unlink()
    artifacts = workdir / "artifacts"
    results = {
        "bashrpc": measure(lambda: BashrpcPeer(artifacts, home), calls, zero_bytes, expected),
        "bashrpc kept": measure(
            lambda: BashrpcPeer(artifacts, home, kept=True), calls, zero_bytes, expected
        ),
    }
    notes = []
    for peer in PEERS:
        executable, why = install(peer, cache_dir())
        if executable is None:
            notes.append(f"{peer.name} skipped: {why}")
            continue
        try:
            start: Start = functools.partial(JsonlPeer, executable, home, workdir)
            results[peer.name] = measure(start, calls, zero_bytes, expected)
        except (OSError, EOFError, RuntimeError, ValueError) as exc:
            notes.append(f"{peer.name} skipped: it did not answer ({exc})")
    return list(results), results, notes


def table(systems: list[str], results: dict[str, dict[str, float]]) -> str:
    metrics = list(results["bashrpc"])
    lines = ["| metric | " + " | ".join(systems) + " |", "| --- |" + " --- |" * len(systems)]
    for metric in metrics:
        cells = [_cell(results[s], metric) for s in systems]
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(figures: dict[str, float], metric: str) -> str:
    """A system whose zeros were not all there (or could not be checked) is not ranked."""
    if metric not in figures:
        return "-"
    if metric == ZEROS and figures.get(EXACT) != 1:
        return f"({figures[metric]:.3g}: bytes lost or unchecked, not ranked)"
    return f"{figures[metric]:.3g}"


def kept_ratios(results: dict[str, dict[str, float]]) -> list[str]:
    """bashrpc keeping the output (not streaming it) against each peer, like for
    like (the target is ≥ 1.1); only where both were byte-exact."""
    ours = results.get("bashrpc kept", {})
    lines = []
    for system, figures in results.items():
        if system.startswith("bashrpc"):
            continue
        if ours.get(EXACT) != 1 or figures.get(EXACT) != 1:
            lines.append(f"zeros kept, bashrpc / {system}: not compared (bytes lost or unchecked)")
            continue
        ratio = ours[ZEROS] / figures[ZEROS]
        lines.append(f"zeros kept, bashrpc / {system}: {ratio:.2f}× (target ≥ 1.1)")
    return lines
