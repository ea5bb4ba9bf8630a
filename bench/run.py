"""`python -m bench`: run the cases, print the table, save it as JSON.

A run's JSON goes to a cache (or `--out DIR`); only `--record` rewrites the
committed `bench/results/latest.json` and `.png`, which the benchmarks page's table
comes from, so trying a case never changes a tracked file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench import peers
from bench.cases import CASES, run_cases
from bench.plot import plot
from bench.rows import Row
from bench.workbench import QUICK, Sizes

# The committed results, which docs/benchmarks.md's table comes from: `--record` only.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def cache_results_dir() -> Path:
    """Where a run's results go unless told otherwise: out of the repository."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bashrpc-bench" / "results"


def format_value(value: float) -> str:
    if value != value:  # NaN: nothing measured
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(rows: list[Row]) -> str:
    lines = [
        "| case | metric | median | min–max | unit | target | |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        spread = "-"
        if row.values:
            spread = f"{format_value(min(row.values))}–{format_value(max(row.values))}"
        verdict = {True: "ok", False: "MISSED", None: ""}[row.passed]
        metric = row.metric + (f" ({row.note})" if row.note else "")
        lines.append(
            f"| {row.case} | {metric} | {format_value(row.median)} | {spread} | {row.unit} |"
            f" {row.target} | {verdict} |"
        )
    return "\n".join(lines)


def to_json(rows: list[Row], sizes: Sizes) -> dict[str, object]:
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "sizes": sizes.__dict__,
        "rows": [
            {
                "case": r.case,
                "metric": r.metric,
                "unit": r.unit,
                "median": r.median if r.values else None,
                "min": min(r.values) if r.values else None,
                "max": max(r.values) if r.values else None,
                "values": r.values,
                "target": r.target or None,
                "passed": r.passed,
                "note": r.note or None,
            }
            for r in rows
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness")
    parser.add_argument("--repeat", type=int, help="repetitions per case (default 3)")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), help="run only these cases")
    parser.add_argument(
        "--out",
        type=Path,
        help="where the JSON goes (default: $XDG_CACHE_HOME/bashrpc-bench/results)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"a full run, written to {RESULTS_DIR.relative_to(RESULTS_DIR.parents[1])}/, "
        "the committed results docs/benchmarks.md's table comes from",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also measure pi and omp side by side (installed from npm into a cache)",
    )
    args = parser.parse_args(argv)
    if args.record and (args.quick or args.only or args.out):
        parser.error("--record is a full run into the committed results: no --quick, --only, --out")
    out = RESULTS_DIR if args.record else args.out or cache_results_dir()
    sizes = QUICK if args.quick else Sizes()
    if args.repeat:
        sizes = Sizes(**{**sizes.__dict__, "repeat": args.repeat})
    names = args.only or list(CASES)
    rows = run_cases(names, sizes)
    print(table(rows))
    out.mkdir(parents=True, exist_ok=True)
    data = to_json(rows, sizes)
    name = "quick.json" if args.quick else "latest.json"
    if args.peers:
        data["peers"] = run_peers(sizes, (out / name).with_suffix(".png"))
    (out / name).write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nsaved {out / name}", file=sys.stderr)
    return 0


def run_peers(sizes: Sizes, picture: Path) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bashrpc-peers-") as tmp:
        systems, results, notes = peers.compare(Path(tmp), sizes.peer_calls, sizes.peer_zero_bytes)
    print("\n" + peers.table(systems, results))
    notes += peers.kept_ratios(results)
    skipped = plot(systems, results, picture)
    notes += [skipped] if skipped else []
    for note in notes:
        print(f"- {note}")
    return {"systems": systems, "results": results, "notes": notes}
