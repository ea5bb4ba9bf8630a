"""Write (or check) schemas/ from protocol/.

`python -m bashrpc.server.schemagen [--check] [DIR]`
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bashrpc.protocol.schema import generate, transcript_documents

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "schemas"


def documents() -> dict[str, bytes]:
    """Every schema file: the methods' and notifications', and a transcript line's."""
    return {**generate(), **transcript_documents()}


def stale(directory: Path) -> list[str]:
    """Names of files that differ from what the protocol generates, or are extra."""
    wanted = documents()
    problems = [
        name
        for name, content in wanted.items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != content
    ]
    extra = [
        str(p.relative_to(directory))
        for p in directory.rglob("*.json")
        if str(p.relative_to(directory)) not in wanted
    ]
    return sorted(problems + extra)


def write(directory: Path) -> None:
    wanted = documents()
    for path in directory.rglob("*.json"):
        if str(path.relative_to(directory)) not in wanted:
            path.unlink()
    for name, content in wanted.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bashrpc.server.schemagen")
    parser.add_argument("--check", action="store_true", help="fail if the files are stale")
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    if args.check:
        problems = stale(args.directory)
        for name in problems:
            print(f"stale: {name}", file=sys.stderr)
        return 1 if problems else 0
    write(args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
