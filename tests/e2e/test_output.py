"""Big output: bounded memory, complete artifacts, and a client that reads slowly."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from protocol import messages
from tests.rpc import ServerProcess

MIB = 1024 * 1024
RSS_GROWTH_LIMIT = 16 * MIB


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """Samples a process's RSS in the background while a block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (OSError, AssertionError):
                return
            time.sleep(0.02)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(4 * MIB):
            digest.update(block)
    return digest.hexdigest()


def test_one_gib_of_output_keeps_memory_flat_and_the_artifact_exact(
    server: ServerProcess,
) -> None:
    server.bash("true")  # the shell is up: measure the command, not the start
    baseline = rss_bytes(server.pid)
    with PeakRss(server.pid) as rss:
        result = server.bash("head -c 1G /dev/zero | tr '\\0' a", wait=300)
    assert rss.peak - baseline <= RSS_GROWTH_LIMIT, (baseline, rss.peak)
    assert result["totalBytes"] == 1 << 30 and result["truncated"]
    assert result["totalLines"] == 1 and result["outputLines"] == 1
    assert result["output"] == "a" * result["outputBytes"]
    artifact = server.artifacts_dir / f"{result['artifactId']}.bash.log"
    assert artifact.stat().st_size == 1 << 30
    expected = hashlib.sha256()
    block = b"a" * (4 * MIB)
    for _ in range(256):
        expected.update(block)
    assert sha256_file(artifact) == expected.hexdigest()


def test_slow_client_gets_everything_once_it_reads_again(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "server", "--artifacts-dir", str(tmp_path / "a")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        command = "seq 1 3000000; echo end"
        for ident, session in ((1, "one"), (2, "two")):
            request = {
                "jsonrpc": "2.0",
                "id": ident,
                "method": "bash",
                "params": {"command": command, "sessionId": session},
            }
            proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        time.sleep(0.5)
        baseline = rss_bytes(proc.pid)
        with PeakRss(proc.pid) as rss:
            time.sleep(5)  # the client does not read at all
        assert rss.peak - baseline <= RSS_GROWTH_LIMIT
        results: dict[int, dict] = {}
        chunks: dict[int, list[dict]] = {1: [], 2: []}
        while len(results) < 2:
            message = json.loads(proc.stdout.readline())
            if message.get("method") == "bash/chunk":
                chunks[message["params"]["requestId"]].append(message["params"])
            else:
                results[message["id"]] = message["result"]
    finally:
        proc.kill()
        proc.wait()
    expected = subprocess.run(["seq", "1", "3000000"], capture_output=True).stdout + b"end\n"
    for ident in (1, 2):
        result = results[ident]
        assert result["exitCode"] == 0 and result["totalBytes"] == len(expected)
        assert result["output"].endswith("2999999\n3000000\nend\n")
        artifact = tmp_path / "a" / f"{result['artifactId']}.bash.log"
        assert hashlib.sha256(artifact.read_bytes()).hexdigest() == (
            hashlib.sha256(expected).hexdigest()
        )
        seqs = [c["seq"] for c in chunks[ident]]
        assert seqs == list(range(len(seqs)))
        streamed = "".join(c["text"] for c in chunks[ident])
        assert streamed.endswith("3000000\nend\n")
        skipped = messages.NOTICE_CHUNKS_SKIPPED.split("{count}")[1]
        # Either everything streamed, or the gap is marked where text was skipped.
        assert streamed.encode() == expected or skipped in streamed
