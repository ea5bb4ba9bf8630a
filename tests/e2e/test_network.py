"""The sandbox's network allowlist with real bwrap and real clients, as root and
as uid 65534, in workspace-write and read-only: what goes out through the
session's proxy, and each way around it that must not."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.methods import BashParams, BashResult, SessionListResult
from tests.githost import USERS, Host
from tests.networld import HELLO, PACKAGE, World, network_settings
from tests.rpc import ServerProcess, ok_result
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODES = ("workspace-write", "read-only")
COMMAND_SECONDS = 120.0
PY = sys.executable


class Net:
    """One server as one user in one mode, with the world it reaches."""

    def __init__(self, host: Host, world: World, server: ServerProcess, mode: str) -> None:
        self.host, self.world, self.server, self.mode = host, world, server, mode
        # A Python with pip that the user can run (the suite's may be root's alone).
        self.python = PY if host.user == "root" else "/usr/bin/python3"
        ca = str(self.host.base / "project" / "ca.pem")
        self.env = {
            "CURL_CA_BUNDLE": ca,
            "GIT_SSL_CAINFO": ca,
            "PIP_CERT": ca,
            "REQUESTS_CA_BUNDLE": ca,
            "NODE_EXTRA_CA_CERTS": ca,
            "SSL_CERT_FILE": ca,
            "CA": ca,
        }

    def run(self, command: str, session: str = "main") -> BashResult:
        params = BashParams(command=command, session_id=session, env=self.env, timeout=100)
        reply = self.server.call("bash", params, timeout=COMMAND_SECONDS)
        return ok_result(reply, BashResult)

    def connections(self, session: str = "main") -> list[dict[str, object]]:
        reply = self.server.call("session/list", timeout=COMMAND_SECONDS)
        listed = ok_result(reply, SessionListResult)
        (found,) = [s for s in listed.sessions if s.session_id == session]
        return [
            {"host": c.host, "port": c.port, "allowed": c.allowed, "reason": c.reason}
            for c in found.connections or []
        ]


def serve(host: Host, world: World, mode: str, extra: str = "") -> ServerProcess:
    return host.serve(
        host.base / "project",
        mode,
        network_settings(extra),
        env={"PYTHONPATH": str(ROOT)},
        interpreter=(PY, "-m", "tests.netserve", str(world.mapping)),
    )


@pytest.fixture(scope="module", params=[(u, m) for u in USERS for m in MODES], ids=str)
def net(request: pytest.FixtureRequest) -> Iterator[Net]:
    skip_without_sandbox()
    user, mode = request.param
    if user == "nobody" and os.geteuid() != 0:
        pytest.skip("only root can run the host as uid 65534")
    base = Path(tempfile.mkdtemp(prefix="bashrpc-net-"))
    base.chmod(0o755)
    host = Host(user, base)
    world = World(base / "world")
    workspace = base / "project"
    workspace.mkdir()
    host.write(workspace / "ca.pem", world.ca.read_text())
    host.write(workspace / ".keep", "")
    try:
        yield Net(host, world, serve(host, world, mode), mode)
    finally:
        host.stop()
        world.stop()
        shutil.rmtree(base, ignore_errors=True)


# -- real clients ---------------------------------------------------------------


def test_curl_plain_and_tls(net: Net) -> None:
    done = net.run(
        "curl -sS http://plain.example.org/hello.txt && curl -sS https://files.example.org/hello.txt"
    )
    assert (done.exit_code, done.output) == (0, HELLO + HELLO)


def test_wget_plain_and_tls(net: Net) -> None:
    done = net.run(
        "wget -q -O- http://plain.example.org/hello.txt"
        ' && wget -q --ca-certificate="$CA" -O- https://files.example.org/hello.txt'
    )
    assert (done.exit_code, done.output) == (0, HELLO + HELLO)


def test_git_clone_over_https(net: Net) -> None:
    done = net.run(
        "git clone -q https://git.example.org/repo.git /tmp/repo && cat /tmp/repo/README"
    )
    assert (done.exit_code, done.output) == (0, "cloned through the proxy\n")


def test_pip_download(net: Net) -> None:
    done = net.run(
        f"{net.python} -m pip download -q --no-cache-dir --no-deps -d /tmp/dl"
        f" --index-url https://pypi.example.org/simple {PACKAGE} && ls /tmp/dl"
    )
    assert (done.exit_code, done.output) == (0, f"{PACKAGE}-1.0-py3-none-any.whl\n"), done.output


def test_npm_pack(net: Net) -> None:
    done = net.run(
        'mkdir /tmp/pack && npm pack -s --cafile "$CA" --cache /tmp/npm'
        f" --pack-destination /tmp/pack --registry https://npm.example.org/ {PACKAGE}"
        " >/dev/null && ls /tmp/pack"
    )
    assert (done.exit_code, done.output) == (0, f"{PACKAGE}-1.0.0.tgz\n"), done.output
