"""Write (or check) schemas/ from protocol/.

`python -m bashrpc.server.gen.schemas [--check] [DIR]`
"""

from __future__ import annotations

import sys
from pathlib import Path

from bashrpc.protocol.schema import generate, transcript_documents
from bashrpc.server.gen import files as genfiles

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "schemas"
PATTERN = "*.json"


def documents() -> dict[str, bytes]:
    """Every schema file: the methods' and notifications', and a transcript line's."""
    return {**generate(), **transcript_documents()}


def stale(directory: Path) -> list[str]:
    """Names of files that differ from what the protocol generates, or are extra."""
    return genfiles.stale(directory, documents(), PATTERN)


if __name__ == "__main__":
    sys.exit(genfiles.main("python -m bashrpc.server.gen.schemas", DEFAULT_DIR, documents, PATTERN))
