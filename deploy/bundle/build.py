"""Build a relocatable bashrpc bundle: a Python of its own with bashrpc inside,
for task images that have no Python, or an old one (SWE-bench images, say).

    python3 deploy/bundle/build.py OUT [--python EXE] [--wheels DIR]

`--python` is a CPython >= 3.11 whose executable needs no libpython beside it
(python-build-standalone's `install/bin/python3`, or Debian's
/usr/bin/python3.11); by default the one this script runs on, which must then
be such a Python too. Its executable and standard library are copied into
OUT/python, bashrpc and its dependencies are installed into that copy's own
site-packages (from `--wheels DIR` only, for an offline build), and
OUT/bin/bashrpc starts it. Nothing is set in the environment: the launcher
runs Python isolated (`-I`), so neither PYTHONPATH nor anything else of the
image reaches bashrpc, and nothing of bashrpc's reaches the commands. Copy
OUT anywhere (an init container into an emptyDir, say) and run OUT/bin/bashrpc.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
# Not needed to serve: left out to keep the bundle small (about 45 MB).
SKIPPED = ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__")
LAUNCHER = """#!/bin/sh
# bashrpc from a relocatable bundle: everything is found from this file's place.
here=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
exec "$here/python/bin/python3" -I -m bashrpc "$@"
"""
PROBE = (
    "import sys, sysconfig; print(sysconfig.get_paths()['stdlib']); "
    "print(sys.version_info >= (3, 11))"
)
SITE_PROBE = "import site; print(site.getsitepackages()[0])"


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def build(out: Path, python: str, wheels: Path | None) -> None:
    exe = Path(shutil.which(python) or python).resolve()
    stdlib, recent = run(str(exe), "-I", "-c", PROBE).split()
    if recent != "True":
        sys.exit(f"{exe}: bashrpc needs Python 3.11 or newer")
    if out.exists():
        sys.exit(f"{out} exists: give a new directory")
    lib = out / "python" / "lib"
    (out / "python" / "bin").mkdir(parents=True)
    shutil.copy2(exe, out / "python" / "bin" / "python3")
    shutil.copytree(
        stdlib,
        lib / Path(stdlib).name,
        symlinks=True,
        ignore=shutil.ignore_patterns(*SKIPPED, "site-packages", "dist-packages"),
    )
    bundled = out / "python" / "bin" / "python3"
    site_packages = Path(run(str(bundled), "-I", "-c", SITE_PROBE).strip())
    if out.resolve() not in site_packages.resolve().parents:
        sys.exit(f"{exe} does not relocate: its site-packages would be {site_packages}")
    source = ["--no-index", "--find-links", str(wheels)] if wheels else []
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--target",
            str(site_packages),
            *source,
            str(PROJECT),
        ],
        check=True,
    )
    launcher = out / "bin" / "bashrpc"
    launcher.parent.mkdir()
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    print(f"bundle in {out}: {out / 'bin' / 'bashrpc'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--wheels", type=Path, default=None)
    args = parser.parse_args()
    build(args.out, args.python, args.wheels)


if __name__ == "__main__":
    os.umask(0o022)
    main()
