"""The documentation: the generated reference is fresh, the site builds with
--strict, the guide has its pages, and the README's links lead somewhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from mkdocs.config import load_config

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
}
BUILD_TIMEOUT_SECONDS = 300


def test_reference_is_fresh() -> None:
    assert stale(DOCS / "reference") == [], "run: python -m bashrpc.server.docsgen"


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
