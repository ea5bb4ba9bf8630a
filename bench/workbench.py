"""What every benchmark case is given: the sizes it runs at and where it works.

A leaf: the cases (`cases.py`, `fairness.py`, `daemonload.py`) are written
against `Workbench`, so none of them needs another to know what it is run with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Sizes:
    repeat: int = 3
    latency_calls: int = 2000
    warmup_calls: int = 200
    # `/bin/true`s in the loop that times bash's own fork and exec.
    fork_loops: int = 1000
    startup_runs: int = 10
    zero_bytes: str = "1G"
    seq_count: int = 50_000_000
    first_chunk_runs: int = 5
    sessions: int = 32
    calls_per_session: int = 100
    small_writes: int = 100_000
    trickle_seconds: float = 5.0
    idle_seconds: float = 5.0
    swerex_calls: int = 100
    swerex_warmup: int = 10
    intercept_calls: int = 2000
    sandbox_sessions: int = 10
    peer_calls: int = 200
    peer_zero_bytes: str = "100M"
    flood_megabytes: int = 1500
    many_sessions: int = 128
    daemon_connections: int = 64
    daemon_calls: int = 200
    input_prompts: int = 20
    network_requests: int = 200
    network_megabytes: int = 100


QUICK = Sizes(
    repeat=1,
    latency_calls=50,
    warmup_calls=10,
    fork_loops=20,
    startup_runs=1,
    zero_bytes="16M",
    seq_count=200_000,
    first_chunk_runs=1,
    sessions=4,
    calls_per_session=5,
    small_writes=1000,
    trickle_seconds=0.3,
    idle_seconds=0.5,
    swerex_calls=5,
    swerex_warmup=1,
    intercept_calls=20,
    sandbox_sessions=2,
    peer_calls=5,
    peer_zero_bytes="1M",
    flood_megabytes=8,
    many_sessions=4,
    daemon_connections=4,
    daemon_calls=5,
    input_prompts=2,
    network_requests=5,
    network_megabytes=4,
)


class Workbench(Protocol):
    """A run of the cases: its sizes, its directory, and where servers keep artifacts."""

    @property
    def sizes(self) -> Sizes: ...

    @property
    def workdir(self) -> Path: ...

    @property
    def artifacts(self) -> Path: ...
