"""Artifacts belong to their owner: a workspace's on stdio (two servers sharing one
state directory), a tenant's under the daemon; a reset of every session removes them."""

from __future__ import annotations

import glob
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ArtifactNotFoundData, ErrorCode
from bashrpc.protocol.mcp import (
    ResourcesListResult,
    ResourcesReadParams,
    ResourcesReadResult,
    TextResourceContents,
)
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import (
    ArtifactReadParams,
    ArtifactReadResult,
    SessionResetParams,
    SessionResetResult,
)
from bashrpc.server.output.artifactroot import workspace_key
from tests.conftest import SpawnInProcess
from tests.daemon import DaemonProcess, introduce
from tests.inprocess import InProcessServer
from tests.rpc import RpcClient, wait_until

# Output past this spills into an artifact; small, so the test writes little.
SPILLING = "[output]\nmaxBytes = 1024\n"
# Only to catch a hang.
GONE_SECONDS = 30.0


def spill(server: RpcClient, label: str) -> int:
    result = server.bash(f"echo {label}; seq 1 2000")
    assert result.artifact_id is not None
    return result.artifact_id


def read_text(server: RpcClient, artifact_id: int) -> str:
    return server.typed(
        ArtifactReadResult, "artifact/read", ArtifactReadParams(id=artifact_id)
    ).text


def test_two_workspaces_sharing_a_state_dir_see_only_their_own(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = spawn(SPILLING, workspace=tmp_path / "a")
    b = spawn(SPILLING, workspace=tmp_path / "b")
    assert a.artifacts_root == b.artifacts_root
    assert [spill(a, "from-a"), spill(a, "again-a"), spill(b, "from-b")] == [1, 2, 1]
    # The same id means each workspace's own artifact.
    assert read_text(a, 1).startswith("from-a\n") and read_text(b, 1).startswith("from-b\n")
    error = b.error("artifact/read", ArtifactReadParams(id=2))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    assert error.message == messages.artifact_not_found(2, [1])
    for server, expected in ((a, ["artifact://2", "artifact://1"]), (b, ["artifact://1"])):
        server.result("initialize", initialize_params())
        listed = server.typed(ResourcesListResult, "resources/list").resources
        assert sorted(r.uri for r in listed) == sorted(expected)
    error = b.error("resources/read", ResourcesReadParams(uri="artifact://2"))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    contents = b.typed(
        ResourcesReadResult, "resources/read", ResourcesReadParams(uri="artifact://1")
    ).contents
    assert isinstance(contents[0], TextResourceContents)
    assert contents[0].text.startswith("from-b\n")


def test_not_found_names_the_twenty_newest_ids(server: InProcessServer) -> None:
    server.artifacts_dir.mkdir(parents=True)
    for artifact_id in range(1, 26):
        (server.artifacts_dir / f"{artifact_id}.bash.log").write_text("x")
    error = server.error("artifact/read", ArtifactReadParams(id=99))
    newest = ", ".join(str(i) for i in range(25, 5, -1))
    assert error.message == f"Artifact 99 not found. Available: {newest} and 5 older"
    available = list(range(25, 5, -1))
    assert msgspec.convert(error.data, ArtifactNotFoundData) == ArtifactNotFoundData(available)


def test_ids_never_repeat_once_every_artifact_was_evicted(
    spawn: SpawnInProcess, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    capped = SPILLING + "[artifacts]\nmaxTotalBytes = 100000\n"
    first = spawn(capped, workspace=tmp_path / "a")
    issued = [spill(first, "one"), spill(first, "two")]
    first.stop()
    # Another workspace's output passes the total cap: every artifact of `a` goes.
    other = spawn(capped, workspace=tmp_path / "b")
    assert other.bash("seq 1 30000").artifact_truncated
    assert list(first.artifacts_dir.glob("*.bash.log")) == []
    again = spawn(capped, workspace=tmp_path / "a")
    assert spill(again, "three") > max(issued)
    error = again.error("artifact/read", ArtifactReadParams(id=issued[0]))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND


def listed(client: RpcClient) -> list[str]:
    return sorted(r.uri for r in client.typed(ResourcesListResult, "resources/list").resources)


def reset_all(client: RpcClient) -> None:
    client.typed(SessionResetResult, "session/reset", SessionResetParams())


@pytest.mark.slow
def test_under_the_daemon_each_client_sees_only_its_own_and_a_reset_removes_them(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(SPILLING)
    daemon = DaemonProcess("--config", str(config), tmp=tmp_path).wait_listening()
    try:
        alice = introduce(daemon.connect(), "alice")
        bob = introduce(daemon.connect(), "bob")
        mine = spill(alice, "alice-secret")
        assert read_text(alice, mine).startswith("alice-secret\n")
        error = bob.error("artifact/read", ArtifactReadParams(id=mine))
        assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
        assert listed(bob) == []
        theirs = spill(bob, "bob-own")
        assert read_text(bob, theirs).startswith("bob-own\n")
        # A new connection of the same client is the same tenant: its artifacts are there.
        alice.close()
        alice = introduce(daemon.connect(), "alice")
        assert listed(alice) == [f"artifact://{mine}"]
        reset_all(alice)
        error = alice.error("artifact/read", ArtifactReadParams(id=mine))
        assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
        assert listed(alice) == []
        # Another tenant's are not the reset's.
        assert read_text(bob, theirs).startswith("bob-own\n")
    finally:
        daemon.kill()


@pytest.mark.slow
def test_a_connection_of_its_own_takes_its_artifacts_with_it(tmp_path: Path) -> None:
    """One that names no clientId: nobody can ask for them once it is gone."""
    config = tmp_path / "config.toml"
    config.write_text(SPILLING)
    daemon = DaemonProcess("--config", str(config), tmp=tmp_path).wait_listening()
    try:
        alone, other = daemon.connect(), daemon.connect()
        spill(alone, "alone")
        assert listed(other) == []
        pattern = glob.escape(workspace_key(tmp_path.resolve())) + ".*"
        [directory] = (tmp_path / "artifacts").glob(pattern)
        alone.close()
        assert wait_until(lambda: not directory.exists(), GONE_SECONDS)
    finally:
        daemon.kill()


def test_a_reset_of_every_session_removes_the_servers_artifacts(spawn: SpawnInProcess) -> None:
    server = spawn(SPILLING)
    kept = spill(server, "last-task")
    server.typed(SessionResetResult, "session/reset", SessionResetParams(session_id="default"))
    # One session's reset leaves the rest of the server's work alone.
    assert read_text(server, kept).startswith("last-task\n")
    reset_all(server)
    error = server.error("artifact/read", ArtifactReadParams(id=kept))
    assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    assert list(server.artifacts_dir.glob("*.bash.log")) == []
