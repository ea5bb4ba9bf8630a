"""The benchmark harness itself runs (tiny sizes) and writes its table as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_bench_writes_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
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
        "small writes",
        "interceptor",
        "sandbox",
    }
    measured = [row for row in data["rows"] if row["values"]]
    # A difference of two medians may come out below zero on a noisy machine.
    positive = [row for row in measured if "difference" not in row["metric"]]
    assert all(row["median"] > 0 or row["unit"] == "KiB" for row in positive)
    swerex = next(row for row in data["rows"] if "SWE-ReX" in row["metric"])
    assert swerex["values"] or "skipped" in swerex["note"]
