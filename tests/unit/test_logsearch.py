"""The search of a job's output for its ready pattern: the pure line search, and
the process the server runs it in."""

from __future__ import annotations

import re
import subprocess
import sys

import msgspec

from bashrpc.server.runtime.jobs import logsearch
from bashrpc.server.runtime.jobs.logsearch import MAX_CARRIED_BYTES, LineSearch

BOUND_SECONDS = 60.0


def test_a_match_split_across_pieces_is_found_once() -> None:
    search = LineSearch(re.compile(r"listening on \d+"))
    assert search.feed(b"starting\nlisten") is None
    assert search.feed(b"ing on 80") == "listening on 80"


def test_only_the_unfinished_line_is_carried_and_it_is_bounded() -> None:
    search = LineSearch(re.compile(r"^ab$"))
    assert search.feed(b"a\nb") is None
    # The finished line `a` is not carried: `ab` never forms.
    assert search.feed(b"\n") is None
    # At most the carried bytes and the new ones are searched together.
    long = LineSearch(re.compile("x" * (2 * MAX_CARRIED_BYTES + 1)))
    for _ in range(4):
        assert long.feed(b"x" * MAX_CARRIED_BYTES) is None


def run_search(pattern: str, output: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-I", "-S", logsearch.__file__],
        input=msgspec.json.encode(pattern) + b"\n" + output,
        capture_output=True,
        timeout=BOUND_SECONDS,
        env={},
    )


def test_the_process_writes_its_match_as_one_line_and_exits() -> None:
    found = run_search("ready: é+\\n?", "noise\nready: éé\nmore".encode())
    assert (found.returncode, found.stderr) == (0, b"")
    line = found.stdout.removeprefix(logsearch.FOUND)
    assert msgspec.json.decode(line, type=str) == "ready: éé\n"
    missed = run_search("never", b"a\nb\n")
    assert (missed.returncode, missed.stdout) == (1, b"")
    # The empty text is searched too, before any output.
    assert run_search("^", b"").returncode == 0
