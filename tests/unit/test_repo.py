"""Repository invariants: generated schemas are fresh, CI runs the README's command."""

from __future__ import annotations

from pathlib import Path

from bashrpc.server.gen.schemas import stale

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200


def test_schemas_are_fresh() -> None:
    assert stale(ROOT / "schemas") == [], "run: python -m bashrpc.server.gen.schemas"


def readme_setup_commands() -> tuple[str, str]:
    """The title, then at once the two set-up commands: run bashrpc, run the suite."""
    readme = (ROOT / "README.md").read_text().splitlines()
    assert readme[0] == "# bashrpc" and readme[1] == ""
    assert readme[2] == "```sh" and readme[5] == "```"
    return readme[3], readme[4]


def test_ci_runs_the_readme_test_command() -> None:
    run_line, test_line = readme_setup_commands()
    assert "bashrpc exec" in run_line
    assert "pytest" in test_line and ".[test,docs]" in test_line
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_line in ci


def test_readme_is_short() -> None:
    """The README introduces; the guide is the site under docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) < README_MAX_LINES
