"""Security: artifacts stay in their directory, files are private, and request
fields never become shell syntax."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import (
    BashToolArguments,
    ResourcesListResult,
    ResourcesReadParams,
    ToolsCallParams,
)
from bashrpc.protocol.methods import ArtifactReadParams, BashParams, SessionOpenParams
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer


def make_artifact(server: InProcessServer) -> int:
    artifact_id = server.bash("seq 1 100000").artifact_id
    assert artifact_id is not None
    return artifact_id


@pytest.mark.parametrize(
    "artifact_id",
    ["../../etc/passwd", "/etc/passwd", "1/../2", "%2e%2e%2f", "1.bash.log", -1, 1.5, None, [1]],
)
def test_artifact_read_takes_only_a_number(server: InProcessServer, artifact_id: object) -> None:
    error = server.error_raw("artifact/read", {"id": artifact_id})
    assert error.code == ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize(
    "uri",
    [
        "artifact://../../etc/passwd",
        "artifact:///etc/passwd",
        "artifact://1/../../etc/passwd",
        "artifact://%2e%2e/%2e%2e/etc/passwd",
        "artifact://1%00",
        "artifact://\uff11",  # a full-width digit is not a digit here
        "artifact://-1",
        "file:///etc/passwd",
        "artifact:/1",
    ],
)
def test_resource_uris_cannot_escape(server: InProcessServer, uri: str) -> None:
    error = server.error("resources/read", ResourcesReadParams(uri=uri))
    assert error.code == ErrorCode.INVALID_PARAMS


def test_planted_symlinks_and_fifos_are_not_followed(server: InProcessServer) -> None:
    real = make_artifact(server)
    directory = server.artifacts_dir
    secret = server.tmp / "secret.txt"
    secret.write_text("do not read")
    os.symlink(secret, directory / "900.bash.log")
    os.symlink(directory / f"{real}.bash.log", directory / "901.bash.log")
    os.mkfifo(directory / "902.bash.log")
    for artifact_id in (900, 901, 902):
        error = server.error("artifact/read", ArtifactReadParams(id=artifact_id))
        assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
        uri = f"artifact://{artifact_id}"
        error = server.error("resources/read", ResourcesReadParams(uri=uri))
        assert error.code == ErrorCode.ARTIFACT_NOT_FOUND
    listed = {r.uri for r in server.typed(ResourcesListResult, "resources/list").resources}
    assert listed == {f"artifact://{real}"}
    assert b"do not read" not in b"".join(server.raw_lines)


def test_modes_are_private(spawn: SpawnInProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text("alias x='echo x'\n")
    server = spawn()
    artifact = make_artifact(server)
    assert stat.S_IMODE(server.artifacts_dir.stat().st_mode) == 0o700
    mode = (server.artifacts_dir / f"{artifact}.bash.log").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    snapshot = Path(server.bash('printf %s "$BASHRPC_SNAPSHOT"').output)
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE(snapshot.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("name", ["A;B", "$(touch pwned)", "A B", "`id`", "1X", "A=B", "", "é"])
def test_bad_env_names_are_rejected(server: InProcessServer, name: str) -> None:
    for method, params in [
        ("bash", BashParams(command="true", env={name: "1"})),
        ("session/open", SessionOpenParams(session_id="s", env={name: "1"})),
    ]:
        assert server.error(method, params).code == ErrorCode.INVALID_PARAMS
    assert not (server.tmp / "pwned").exists()


def test_no_shell_syntax_through_request_fields(server: InProcessServer) -> None:
    tmp = server.tmp
    payload = f"$(touch {tmp}/from-X) `touch {tmp}/from-Y`; touch {tmp}/from-Z"
    out = server.bash('printf "%s" "$VALUE"', env={"VALUE": payload}).output
    assert out == payload
    # A cwd is data for `cd`, not shell text (relative touches: they would land in tmp).
    odd_dir = tmp / "$(touch from-X) `touch from-Y`; touch from-Z"
    odd_dir.mkdir()
    assert server.bash("pwd", cwd=odd_dir.name).output == f"{odd_dir}\n"
    server.bash("pwd", cwd=f"$(touch {tmp}/from-cwd)")
    # A session id never reaches a shell at all.
    session = f"$(touch {tmp}/from-session); `touch {tmp}/from-session2`"
    assert server.bash("echo ok", session_id=session).output == "ok\n"
    listed = list(server.sessions())
    assert session in listed
    for tool_cwd in (f"$(touch {tmp}/from-tool)", odd_dir.name):
        arguments = msgspec.json.encode(BashToolArguments(command="pwd", cwd=tool_cwd))
        server.call("tools/call", ToolsCallParams(name="bash", arguments=msgspec.Raw(arguments)))
    leaked = sorted(p.name for p in tmp.iterdir() if p.name.startswith("from-"))
    assert leaked == []


def test_prefix_is_applied_once_as_configured(spawn: SpawnInProcess) -> None:
    server = spawn('prefix = "env PREFIXED=1"\n')
    out = server.bash('echo "[$PREFIXED]"; printenv PREFIXED').output
    # The prefix is the config owner's shell text, prepended to the command line;
    # nothing from a request is ever spliced into it.
    assert out == "[]\n"
    assert server.bash("printenv PREFIXED").output == "1\n"
