"""A readable difference between two normalized runs, naming the request and the field."""

from __future__ import annotations

import difflib
import json
from typing import Any

# A report stops after this many differences, and a text diff after this many lines.
MAX_DIFFERENCES = 20
MAX_TEXT_DIFF_LINES = 40
# Strings longer than this, or of several lines, are shown as a line diff; one
# line (with its newline) is shown whole, expected against got.
SHORT_TEXT = 80


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text_diff(expected: str, actual: str) -> list[str]:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "expected",
            "actual",
            n=2,
        )
    )
    shown = [f"    {line.rstrip(chr(10))}" for line in lines[:MAX_TEXT_DIFF_LINES]]
    if len(lines) > MAX_TEXT_DIFF_LINES:
        shown.append(f"    ... {len(lines) - MAX_TEXT_DIFF_LINES} more lines of diff")
    return shown


def _long_texts(expected: Any, actual: Any) -> bool:
    if not (isinstance(expected, str) and isinstance(actual, str)):
        return False
    several_lines = "\n" in expected[:-1] + actual[:-1]
    return several_lines or max(len(expected), len(actual)) > SHORT_TEXT


def _compare(expected: Any, actual: Any, field: str, where: str, out: list[str]) -> None:
    if expected == actual:
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            here = f"{field}.{key}" if field else str(key)
            if key not in actual:
                out.append(f"{where}: {here}: expected {_show(expected[key])}, missing")
            elif key not in expected:
                out.append(f"{where}: {here}: unexpected {_show(actual[key])}")
            else:
                _compare(expected[key], actual[key], here, where, out)
        return
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _compare(e, a, f"{field}[{index}]", where, out)
        return
    if _long_texts(expected, actual):
        out.append(f"{where}: {field}: the text differs")
        out.extend(_text_diff(expected, actual))
        return
    out.append(f"{where}: {field}: expected {_show(expected)}, got {_show(actual)}")


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Lines saying how `actual` differs from `expected`; none when they match."""
    out: list[str] = []
    want, got = expected.get("requests", {}), actual.get("requests", {})
    for label in [*want, *(k for k in got if k not in want)]:
        method = (want.get(label) or got.get(label) or {}).get("method")
        where = f"request {label} ({method})"
        if label not in got:
            out.append(f"{where}: expected, but not sent in this run")
        elif label not in want:
            out.append(f"{where}: not in the transcript")
        else:
            _compare(want[label], got[label], "", where, out)
    for field in ("lockstepOrder", "connection", "unmatched"):
        _compare(expected.get(field), actual.get(field), field, "connection", out)
    if len(out) > MAX_DIFFERENCES:
        out = [*out[:MAX_DIFFERENCES], f"... and {len(out) - MAX_DIFFERENCES} more"]
    return out
