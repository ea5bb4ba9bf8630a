"""The rc capture runs in the sandbox of the shells that replay it.

A command that can write the user's rc (HOME in a writable root), or a file the
rc sources (`. ~/.cargo/env` with `~/.cargo` a writable root), plants a line;
the next capture (a session opened with an environment of its own, or the next
server's start) must run it no more freely than the command itself ran. Real
bwrap, the host as root and as uid 65534, in `read-only` and `workspace-write`;
with the sandbox `off` (as root) the capture runs on the host, where the planted
line does run: that shows the check sees it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.methods import SessionOpenParams
from tests.githost import USERS, Host, host_as
from tests.rpc import ServerProcess, wait_until
from tests.sandboxing import skip_without_sandbox

MODES = ("off", "read-only", "workspace-write")
# What the rc defines besides: the shells still get the user's setup.
SETUP = "alias mark='echo marked'\n"


class Layout(msgspec.Struct, frozen=True):
    """Where the workspace is, which file of the rc a command can write, and the
    settings that make it writable."""

    workspace: Path
    planted: Path
    settings: str = ""
    env: dict[str, str] = {}


def home_in_the_workspace(host: Host) -> Layout:
    host.write(host.home / ".bashrc", SETUP)
    # The git guard refuses a writable root that holds git's global config.
    config = {"GIT_CONFIG_GLOBAL": str(host.base / "config" / "gitconfig")}
    return Layout(host.home, host.home / ".bashrc", env=config)


def rc_sourcing_a_root(host: Host) -> Layout:
    cargo = host.home / ".cargo"
    host.write(cargo / "env", 'export PATH="$HOME/.cargo/bin:$PATH"\n')
    host.write(host.home / ".bashrc", f'. "$HOME/.cargo/env"\n{SETUP}')
    host.write(host.base / "ws" / "README", "")
    return Layout(host.base / "ws", cargo / "env", f'writableRoots = ["{cargo}"]\n')


LAYOUTS = {"home in the workspace": home_in_the_workspace, "rc sources a root": rc_sourcing_a_root}


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    skip_without_sandbox()


@pytest.fixture(params=USERS)
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    """As root and as nobody, under /var/tmp: HOME is in view in the sandbox (its
    /tmp is private), as on a real machine."""
    with host_as(request.param, "/var/tmp") as made:
        yield made


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, host: Host) -> str:
    if request.param == "off" and host.user != "root":
        pytest.skip("the unconfined control runs once, as root")
    return str(request.param)


def plant(host: Host, layout: Layout, server: ServerProcess, mode: str) -> None:
    """The line goes in as the command writes it; in read-only, where no command
    can, as an earlier writable session would have left it."""
    line = f"touch {host.marker}"
    if mode == "read-only":
        host.write(layout.planted, layout.planted.read_text() + line + "\n")
    else:
        result = server.bash(f"printf '%s\\n' '{line}' >> {layout.planted}")
        assert result.exit_code == 0, result.output
    assert line in layout.planted.read_text()


def ran_unconfined(host: Host, server: ServerProcess, session: str) -> bool:
    """Whether the planted line ran on the host by the time `session`'s first
    command ran (with the rc's setup, so the capture did finish)."""
    assert server.bash("mark", session_id=session).output == "marked\n"
    planted = host.marker.exists()
    host.marker.unlink(missing_ok=True)
    return planted


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_planted_rc_line_runs_in_the_sandbox(host: Host, mode: str, layout: str) -> None:
    where = LAYOUTS[layout](host)
    server = host.serve(where.workspace, mode, where.settings, where.env)
    assert not ran_unconfined(host, server, "first")
    plant(host, where, server, mode)
    # A new environment: a capture of its own, on this server.
    opened = server.call("session/open", SessionOpenParams(session_id="env", env={"A": "1"}))
    assert opened.error is None, opened.error
    on_open = ran_unconfined(host, server, "env")
    # The next server's start.
    next_server = host.serve(where.workspace, mode, where.settings, where.env)
    on_start = ran_unconfined(host, next_server, "next")
    assert (on_open, on_start) == (mode == "off", mode == "off")


# Only catches a hang: the end waits up to 5 s for the capture, then its 1 s trap.
END_BOUND_SECONDS = 60.0


def test_a_sandboxed_rc_given_up_on_at_the_end_runs_its_exit_trap(host: Host) -> None:
    """Hung up on, the capture's shell runs its trap to its end inside the sandbox:
    bwrap and its init are not signalled, whose death would kill it mid-trap."""
    workspace = host.base / "ws"
    lock = workspace / "lock"
    host.write(
        host.home / ".bashrc",
        f"trap 'sleep 1; rm -f {lock}' EXIT; touch {lock}; sleep 100\n",
    )
    host.write(workspace / "README", "")
    server = host.serve(workspace, "workspace-write")
    assert wait_until(lock.exists, END_BOUND_SECONDS)
    assert server.close(timeout=END_BOUND_SECONDS) == 0
    assert not lock.exists()
