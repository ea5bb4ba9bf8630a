"""Artifacts belong to a workspace: two servers sharing one state directory."""

from __future__ import annotations

from pathlib import Path

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ArtifactNotFoundData, ErrorCode
from bashrpc.protocol.mcp import (
    ResourcesListResult,
    ResourcesReadParams,
    ResourcesReadResult,
    TextResourceContents,
)
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import ArtifactReadParams, ArtifactReadResult
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer

# Output past this spills into an artifact; small, so the test writes little.
SPILLING = "[output]\nmaxBytes = 1024\n"


def spill(server: InProcessServer, label: str) -> int:
    result = server.bash(f"echo {label}; seq 1 2000")
    assert result.artifact_id is not None
    return result.artifact_id


def read_text(server: InProcessServer, artifact_id: int) -> str:
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
