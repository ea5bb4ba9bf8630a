"""Files generated from the source and committed (`schemas/`, `docs/reference/`):
their rewrite, and the check a test runs so that they never go stale."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

Generate = Callable[[], dict[str, bytes]]


def stale(directory: Path, wanted: dict[str, bytes], pattern: str) -> list[str]:
    """Names of files that differ from `wanted`, are missing, or are extra."""
    problems = [
        name
        for name, content in wanted.items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != content
    ]
    extra = [
        str(p.relative_to(directory))
        for p in directory.rglob(pattern)
        if str(p.relative_to(directory)) not in wanted
    ]
    return sorted(problems + extra)


def write(directory: Path, wanted: dict[str, bytes], pattern: str) -> None:
    for path in directory.rglob(pattern):
        if str(path.relative_to(directory)) not in wanted:
            path.unlink()
    for name, content in wanted.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def main(prog: str, default: Path, generate: Generate, pattern: str) -> int:
    """`prog [--check] [DIR]`: rewrite DIR, or exit 1 naming what is stale."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")
    parser.add_argument("directory", nargs="?", type=Path, default=default)
    args = parser.parse_args()
    if args.check:
        problems = stale(args.directory, generate(), pattern)
        for name in problems:
            print(f"stale: {name}", file=sys.stderr)
        return 1 if problems else 0
    write(args.directory, generate(), pattern)
    return 0
