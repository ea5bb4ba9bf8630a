"""No false positives: the default token formats find nothing in ordinary build
and test output (compiler errors, a test runner, git logs, hashes, UUIDs, made
here by the real tools) nor in the suite's own golden transcripts."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from bashrpc.server.output.redact import Redactor, SecretTable

ROOT = Path(__file__).resolve().parents[2]
CORPUS_BYTES = 10 * 1024 * 1024
BROKEN_C = """
#include <stdio.h>
struct point { int x; int y; };
int main(void) {
    struct point p = {1, 2};
    undeclared_function(p.z, "https://example.com/path?q=1");
    char *s = 42;
    return p.w + missing;
}
"""
TESTS = """
import pytest

@pytest.mark.parametrize("n", range(200))
def test_numbers(n):
    assert n % 17 != 3, f"unlucky {n}"

def test_error():
    raise RuntimeError("connection refused: http://localhost:8080/api/v1/items?id=1")
"""


def run(argv: list[str], cwd: Path) -> bytes:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    return done.stdout + done.stderr


def ordinary_output(tmp: Path) -> list[bytes]:
    (tmp / "broken.c").write_text(BROKEN_C)
    (tmp / "test_sample.py").write_text(TESTS)
    pieces = [
        run(["gcc", "-Wall", "-Wextra", "-c", "broken.c"], tmp),
        run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_sample.py"], tmp
        ),
        run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "test_sample.py"], tmp
        ),
        # Code and messages, not the tests' fixtures (which hold made-up tokens on purpose).
        run(["git", "log", "-p", "--", "server/runtime", "server/wire"], ROOT),
        run(["git", "log", "--stat", "--format=fuller"], ROOT),
        run(["sha256sum", *(str(p) for p in sorted((ROOT / "server").rglob("*.py")))], ROOT),
        "\n".join(str(uuid.uuid4()) for _ in range(20_000)).encode(),
    ]
    return [piece for piece in pieces if piece]


def pattern_hits(data: bytes, chunk: int = 65536) -> Counter[str]:
    redactor = Redactor(SecretTable({}))
    for start in range(0, len(data), chunk):
        redactor.feed(data[start : start + chunk])
    redactor.finish()
    return redactor.counts


@pytest.mark.slow
def test_ten_megabytes_of_build_and_test_output(tmp_path: Path) -> None:
    pieces = ordinary_output(tmp_path)
    assert b"error:" in pieces[0] and b"passed" in pieces[1]
    corpus = b""
    while len(corpus) < CORPUS_BYTES:
        corpus += b"\n".join(pieces)
    assert pattern_hits(corpus) == Counter()


def test_the_golden_transcripts() -> None:
    transcripts = sorted((ROOT / "tests" / "transcripts").glob("*.jsonl"))
    assert len(transcripts) > 20
    for path in transcripts:
        assert pattern_hits(path.read_bytes()) == Counter(), path.name
