"""The documentation: the generated reference is fresh, the site builds with
--strict, the guide has its pages, and the README's links lead somewhere."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from mkdocs.config import load_config

from bashrpc.protocol import mcp, methods, terminals
from bashrpc.protocol.errors import ErrorCode
from bashrpc.server.cli.main import build_parser
from bashrpc.server.docsgen import stale

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Each guide page, and a word its title must hold: a reader scanning the
# headings finds it there (a newcomer looked for "container" for minutes).
GUIDE_TITLES = {
    "index.md": "bashrpc",
    "methods.md": "Methods",
    "mcp-tool.md": "MCP tool",
    "pty.md": "PTY",
    "sessions-and-daemon.md": "daemon",
    "remote-and-containers.md": "container",
    "sandbox.md": "threat model",
    "settings.md": "Settings",
    "testing-your-host.md": "host",
    "benchmarks.md": "Benchmarks",
    "architecture.md": "Architecture",
    "background-jobs.md": "Background jobs",
    "fleet.md": "fleet",
    "tutorial.md": "Tutorial",
    "troubleshooting.md": "Troubleshooting",
    "changelog.md": "Changelog",
    "shell-internals.md": "shell",
}
BUILD_TIMEOUT_SECONDS = 300


def test_reference_is_fresh() -> None:
    assert stale(DOCS / "reference") == [], "run: python -m bashrpc.server.docsgen"


def test_protocol_reference_has_every_message_and_code() -> None:
    page = (DOCS / "reference" / "protocol.md").read_text()
    tables: list[Mapping[str, object]] = [
        methods.METHODS,
        mcp.METHODS,
        methods.NOTIFICATIONS_FROM_CLIENT,
        methods.NOTIFICATIONS_FROM_SERVER,
        mcp.NOTIFICATIONS_FROM_CLIENT,
        mcp.NOTIFICATIONS_FROM_SERVER,
        terminals.METHODS,
        terminals.NOTIFICATIONS_FROM_CLIENT,
        terminals.NOTIFICATIONS_FROM_SERVER,
    ]
    missing = [name for table in tables for name in table if f"### `{name}` " not in page]
    missing += [str(code) for code in ErrorCode if f"| `{int(code)}` | `{code.name}` |" not in page]
    assert missing == []


def parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [parser, *(p for sub in subs for p in sub.choices.values())]


def test_cli_reference_has_every_command_and_option() -> None:
    page = (DOCS / "reference" / "cli.md").read_text()
    missing = []
    for parser in parsers(build_parser()):
        section = page.split(f"## `{parser.prog}` ", 1)[-1].split("\n## ", 1)[0]
        if section == page:
            missing.append(parser.prog)
        for action in parser._actions:
            shown = action.help != argparse.SUPPRESS and action.dest != "help"
            if shown and not all(f"`{o}`" in section for o in action.option_strings):
                missing.append(f"{parser.prog} {action.option_strings}")
    assert missing == []


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    """A broken link or anchor, or a page left out of the nav, fails the build.
    The docs extra is part of the test command: a missing mkdocs fails here."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    config, site = str(ROOT / "mkdocs.yml"), str(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "-d", site],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "remote-and-containers" / "index.html").is_file()


def nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for value in node.values() for p in nav_pages(value)]
    if isinstance(node, list):
        return [p for item in node for p in nav_pages(item)]
    return []


def test_guide_pages_are_in_the_nav_with_their_titles() -> None:
    listed = nav_pages(load_config(str(ROOT / "mkdocs.yml")).nav)
    for page, word in GUIDE_TITLES.items():
        assert page in listed, page
        title = (DOCS / page).read_text().splitlines()[0]
        assert title.startswith("# ") and word.lower() in title.lower(), (page, title)


def test_drafts_for_other_pages_are_not_built() -> None:
    """docs/changes/ holds sections written for pages a branch does not own,
    folded in at merge: the site must not build them as pages."""
    excluded = load_config(str(ROOT / "mkdocs.yml")).exclude_docs
    assert excluded is not None
    assert excluded.match_file("changes/32-topic.md")
    assert not excluded.match_file("methods.md")


def test_readme_links_lead_to_files() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links to the guide"
    assert [t for t in local if not (ROOT / t).exists()] == []


def _minutes(text: str, pattern: str) -> float:
    (found,) = re.findall(pattern, text)
    return float(found)


def test_the_readme_gives_the_suites_time_the_development_page_measured() -> None:
    measured = _minutes(
        (DOCS / "development.md").read_text(), r"suite takes about (\d+(?:\.\d+)?) min"
    )
    said = _minutes((ROOT / "README.md").read_text(), r"takes\s+about (\d+) minutes? on a quiet")
    assert said == round(measured)


def test_the_pages_name_the_workspace_flag_by_its_name() -> None:
    """`--cwd` is the flag's first name, still accepted; a page says it only as that."""
    pages = [ROOT / "README.md", *DOCS.glob("*.md")]
    for page in pages:
        for match in re.finditer(r"`--cwd`(.{0,20})", page.read_text(), flags=re.S):
            assert match.group(1).startswith(", its first"), f"{page.name}: {match.group(0)!r}"


@pytest.mark.parametrize(
    ("page", "section"),
    [("README.md", "## A one-minute tour"), ("docs/index.md", "## Getting started")],
)
def test_the_tour_says_which_bashrpc_it_runs(page: str, section: str) -> None:
    """The examples run `bashrpc`; the first line installed it in .venv, not on PATH."""
    text = (ROOT / page).read_text()
    intro = text.split(section + "\n", 1)[1].split("\n#", 1)[0]
    assert "`.venv/bin/bashrpc`" in intro and ". .venv/bin/activate" in intro
