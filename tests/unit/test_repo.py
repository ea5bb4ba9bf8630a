"""Repository invariants: generated schemas are fresh, CI runs the README's command."""

from __future__ import annotations

from pathlib import Path

from bashrpc.server.schemagen import stale

ROOT = Path(__file__).resolve().parents[2]


def test_schemas_are_fresh() -> None:
    assert stale(ROOT / "schemas") == [], "run: python -m bashrpc.server.schemagen"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    assert readme[0] == "```sh" and readme[3] == "```"
    run_line, test_line = readme[1], readme[2]
    assert "bashrpc exec" in run_line
    assert "pytest" in test_line
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_line in ci
