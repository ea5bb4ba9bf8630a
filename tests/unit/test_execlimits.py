"""The exec limits as the kernel applies them: checked against real execs."""

from __future__ import annotations

import errno
import subprocess

import pytest

from bashrpc.server.runtime.run import execlimits
from bashrpc.server.runtime.run.execlimits import ExecLimits, TooLarge, TooLong

TRUE = "/bin/true"
LIMITS = execlimits.current()


def exec_true(env: dict[str, str]) -> int:
    """errno of exec'ing `true` with exactly this environment, 0 when it ran."""
    try:
        subprocess.run([TRUE], env=env, check=True)
    except OSError as exc:
        return exc.errno or -1
    return 0


def env_costing(total: int) -> dict[str, str]:
    """Variables that cost an exec exactly `total` bytes, each well under the string limit."""
    env: dict[str, str] = {}
    wanted = total
    while total:
        name = f"V{len(env):05d}"
        overhead = execlimits.entry_bytes(name, "")
        size = min(total, LIMITS.string_bytes // 2)
        if 0 < total - size < 2 * overhead:
            size = total - 2 * overhead
        env[name] = "x" * (size - overhead)
        total -= size
    assert sum(execlimits.entry_bytes(k, v) for k, v in env.items()) == wanted
    return env


def test_the_total_is_counted_as_the_kernel_counts_it() -> None:
    # exec copies the file name and argv[0] (each with its NUL) and a pointer for argv.
    budget = LIMITS.total_bytes - 2 * (len(TRUE) + 1) - execlimits.POINTER_BYTES
    assert exec_true(env_costing(budget)) == 0
    assert exec_true(env_costing(budget + 1)) == errno.E2BIG


def test_one_string_is_counted_as_the_kernel_counts_it() -> None:
    longest = "x" * (LIMITS.string_bytes - len("BIG=") - 1)
    assert exec_true({"BIG": longest}) == 0
    assert exec_true({"BIG": longest + "x"}) == errno.E2BIG
    assert execlimits.refusal({"BIG": longest}, ["BIG"], LIMITS) is None
    assert execlimits.refusal({"BIG": longest + "x"}, ["BIG"], LIMITS) == TooLong(
        "BIG", LIMITS.string_bytes + 1, LIMITS.string_bytes
    )


LIMITS_SMALL = ExecLimits(string_bytes=100, total_bytes=execlimits.COMMAND_LINE_ROOM_BYTES + 1000)


@pytest.mark.parametrize(
    ("env", "given", "expected"),
    [
        # `A=`, the value and a NUL.
        ({"A": "x" * 97}, ["A"], None),
        ({"A": "x" * 98}, ["A"], TooLong("A", 101, 100)),
        # Only the caller's names are measured one by one; utf-8 counts in bytes.
        ({"A": "x" * 98}, [], None),
        ({"A": "é" * 49}, ["A"], TooLong("A", 101, 100)),
        # A name the caller gave that the environment no longer holds (a guard).
        ({"B": "1"}, ["A"], None),
        # 72 bytes each with a pointer of 8: 13 fit in 1000 bytes, 14 do not.
        ({f"V{chr(65 + i)}": "x" * 60 for i in range(13)}, [], None),
        (
            {f"V{chr(65 + i)}": "x" * 60 for i in range(14)},
            [],
            TooLarge(14 * 72, LIMITS_SMALL.total_bytes, execlimits.COMMAND_LINE_ROOM_BYTES),
        ),
    ],
)
def test_refusal(env: dict[str, str], given: list[str], expected: object) -> None:
    assert execlimits.refusal(env, given, LIMITS_SMALL) == expected
