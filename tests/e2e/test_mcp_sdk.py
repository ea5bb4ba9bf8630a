"""The official MCP Python SDK as the client: bashrpc works as a stdio MCP server as is.

The SDK is imported by the test that uses it, not by this module: it takes most
of a second, which every test worker would otherwise pay just to collect.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from bashrpc.protocol import messages
from tests.rpc import cmdline, live_pids, owned_processes, proc_stat, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from mcp import ClientSession, StdioServerParameters
    from mcp.types import InitializeResult

HANG_SECONDS = 30


def params(tmp_path: Path) -> StdioServerParameters:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "bashrpc", "--artifacts-dir", str(tmp_path / "artifacts")],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        cwd=str(tmp_path),
    )


def text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert len(content) == 1 and content[0].type == "text"
    return str(content[0].text)


SdkCase = Callable[["ClientSession", "InitializeResult"], Awaitable[None]]


def with_sdk_session(tmp_path: Path, case: SdkCase) -> None:
    """Run `case` on an initialized SDK session with a bashrpc server of its own."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async def main() -> None:
        with open(tmp_path / "server-stderr.log", "w") as errlog:
            async with (
                stdio_client(params(tmp_path), errlog=errlog) as streams,
                ClientSession(*streams) as session,
            ):
                with anyio.fail_after(HANG_SECONDS):
                    await case(session, await session.initialize())

    anyio.run(main)


def test_sdk_initialize_names_the_server_and_the_protocol(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        assert init.server_info.name == "bashrpc"
        assert init.protocol_version == "2025-06-18"

    with_sdk_session(tmp_path, case)


def test_sdk_lists_the_one_bash_tool(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["bash"]
        assert "command" in tools.tools[0].input_schema["properties"]

    with_sdk_session(tmp_path, case)


def test_sdk_call_gives_text_and_structured_content(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        ok = await session.call_tool("bash", {"command": "echo hello from bash"})
        assert not ok.is_error and text(ok) == "hello from bash\n"
        assert ok.structured_content == {
            "output": "hello from bash\n",
            "exitCode": 0,
            "cancelled": False,
            "timedOut": False,
            "truncation": None,
            "artifactUri": None,
            "sandboxDenied": False,
            "shellRestarted": False,
        }

    with_sdk_session(tmp_path, case)


def test_sdk_call_that_fails_is_an_error_with_its_exit_code(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        failed = await session.call_tool("bash", {"command": "echo nope; (exit 3)"})
        assert failed.is_error
        assert text(failed) == "nope\n\n" + messages.EXITED_WITH_CODE.format(code=3)

    with_sdk_session(tmp_path, case)


def test_sdk_call_past_its_timeout_is_an_error_that_says_so(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        timed = await session.call_tool("bash", {"command": "sleep 30", "timeout": 1})
        assert timed.is_error and text(timed).startswith(messages.timed_out_notice(1))

    with_sdk_session(tmp_path, case)


def test_sdk_reads_and_lists_a_truncated_output_as_a_resource(tmp_path: Path) -> None:
    async def case(session: ClientSession, init: InitializeResult) -> None:
        from mcp.types import TextResourceContents

        big = await session.call_tool("bash", {"command": "seq 1 100000"})
        assert big.structured_content is not None
        artifact = big.structured_content["truncation"]["artifactId"]
        resource = await session.read_resource(f"artifact://{artifact}")
        body = resource.contents[0]
        assert isinstance(body, TextResourceContents), body
        assert str(body.uri) == f"artifact://{artifact}"
        assert body.text == "".join(f"{i}\n" for i in range(1, 100001))
        listed = await session.list_resources()
        assert f"artifact://{artifact}" in {str(r.uri) for r in listed.resources}

    with_sdk_session(tmp_path, case)


def test_sdk_cancelled_call_leaves_the_session_healthy(tmp_path: Path) -> None:
    """The next call says the cancelled one took the shell's state with it; at
    the end, the server leaves no process behind."""
    server_pids: list[int] = []

    async def case(session: ClientSession, init: InitializeResult) -> None:
        server_pids.extend(owned_pids_of_children())
        assert len(server_pids) == 1
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "bash", {"command": "sleep 60"})
            with anyio.fail_after(10):
                while not sleeping(server_pids[0]):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            while sleeping(server_pids[0]):
                await anyio.sleep(0.05)
        again = await session.call_tool("bash", {"command": "echo still healthy"})
        assert text(again) == f"{messages.SHELL_RESTARTED}\nstill healthy\n"
        assert await session.send_ping() is not None

    with_sdk_session(tmp_path, case)
    for pid in server_pids:
        assert wait_until(lambda pid=pid: owned_processes(pid) == [], timeout=10)


def sleeping(server_pid: int) -> bool:
    return any(cmdline(pid) == "sleep 60" for pid in owned_processes(server_pid))


def owned_pids_of_children() -> list[int]:
    """Pids of bashrpc servers that are children of this test process."""
    me = os.getpid()
    return [
        pid
        for pid in live_pids()
        if (stat := proc_stat(pid)) is not None and stat[1] == me and "-m bashrpc" in cmdline(pid)
    ]


MCP1_REQUIREMENT = "mcp>=1.20,<2"
CLIENTS = Path(__file__).parent / "clients"
CLIENT_SCRIPT = CLIENTS / "mcp_streaming_call.py"
ABANDONING_CLIENT_SCRIPT = CLIENTS / "mcp_abandoned_call.py"


def mcp1_python() -> Path:
    """A venv with the 1.x SDK, built from the package index once and reused."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "bashrpc-tests" / "mcp1"
    python = venv / "bin" / "python"
    ready = venv / "ready"
    if not ready.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", MCP1_REQUIREMENT],
            check=True,
            stdin=subprocess.DEVNULL,
        )
        ready.touch()
    return python


def run_mcp1_client(script: Path, tmp_path: Path) -> Any:
    """Run a client script under the 1.x SDK against a bashrpc server; its JSON report."""
    done = subprocess.run(
        [str(mcp1_python()), str(script), sys.executable, str(tmp_path / "artifacts")],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS * 2,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        # The server it starts gets this HOME: the developer's rc stays out.
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_mcp_1x_client_logs_no_validation_error(tmp_path: Path) -> None:
    """Non-MCP notifications make the 1.x SDK log a validation error per notification."""
    report = run_mcp1_client(CLIENT_SCRIPT, tmp_path)
    assert report["text"] == "".join(f"line-{i}\n" for i in range(1, 11))
    assert report["log"] == []


@pytest.mark.slow
def test_mcp_1x_client_closes_cleanly_after_an_abandoned_call(tmp_path: Path) -> None:
    """The 1.x client fails (BrokenResourceError) on any message that arrives after it
    closed its session; closing stdin aborts the abandoned call, which must stay silent."""
    report = run_mcp1_client(ABANDONING_CLIENT_SCRIPT, tmp_path)
    assert report["error"] is None
    assert report["pinged"] is True
