"""The wheel as pip builds it: one top-level package, `bashrpc`, with its JSON Schemas,
which run and read from an installed copy (not the checkout)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.rpc import request_line, server_environment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# What a build reads; copied, so the build's own folders never land in the checkout.
SOURCES = ("pyproject.toml", "README.md", "server", "protocol", "schemas")
BUILD_BOUND_SECONDS = 300
PIP = [sys.executable, "-m", "pip"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once from a copy of the sources with this venv's setuptools."""
    tree = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source, tree / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy(source, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(tree)],
        check=True,
        capture_output=True,
        timeout=BUILD_BOUND_SECONDS,
    )
    [built] = out.glob("bashrpc-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a folder of its own, as site-packages would hold it."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [*PIP, "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=BUILD_BOUND_SECONDS,
    )
    return site


def test_the_wheel_holds_only_the_bashrpc_package_and_its_schemas(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "bashrpc",
        wheel.name.split("-py")[0] + ".dist-info",
    }
    assert "bashrpc/schemas/methods/bash.json" in names
    assert "bashrpc/server/__init__.py" in names and "bashrpc/protocol/__init__.py" in names


def run_installed(site: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """This Python with the installed copy first on its path (before the checkout's
    editable install, whose finder comes after the path's)."""
    env = server_environment(site.parent, {"PYTHONPATH": str(site)})
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, env=env, cwd=site, timeout=60
    )


READ_SCHEMAS = """
import json, sys
from importlib.resources import files
import bashrpc, bashrpc.server, bashrpc.protocol
assert all(m.__file__.startswith(sys.argv[1]) for m in (bashrpc, bashrpc.server, bashrpc.protocol))
schemas = files("bashrpc") / "schemas"
names = sorted(p.name for p in (schemas / "methods").iterdir())
bash = json.loads((schemas / "methods" / "bash.json").read_text())
print(json.dumps({"names": names, "bash": bash}))
"""


def test_installed_the_schemas_read_through_importlib_resources(installed: Path) -> None:
    done = run_installed(installed, "-c", READ_SCHEMAS, str(installed))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "bash.json" in report["names"]
    assert report["bash"] == json.loads((ROOT / "schemas" / "methods" / "bash.json").read_text())


def test_installed_python_m_bashrpc_serves(installed: Path) -> None:
    version = run_installed(installed, "-m", "bashrpc", "--version")
    assert version.returncode == 0 and version.stdout.startswith(b"bashrpc "), version.stderr
    served = run_installed(installed, "-m", "bashrpc", stdin=request_line(1, "ping"))
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout) == {"jsonrpc": "2.0", "id": 1, "result": {}}
