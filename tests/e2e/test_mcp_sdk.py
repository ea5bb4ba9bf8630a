"""The official MCP Python SDK as the client: bashrpc works as a stdio MCP server as is.

The SDK is imported by the test that uses it, not by this module: it takes most
of a second, which every test worker would otherwise pay just to collect.
"""

from __future__ import annotations

import json
import logging
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


SdkBody = Callable[["ClientSession"], Awaitable[None]]


class McpErrors(logging.Handler):
    """What the SDK logs at WARNING or above: a client that reports an error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def run_sdk(tmp_path: Path, body: SdkBody) -> None:
    """`body` with an initialized 2.x SDK session to a bashrpc of its own; then no
    process of that server may be left, and the SDK must have reported no error."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    errors: list[object] = []
    logged = McpErrors()
    mcp_log = logging.getLogger("mcp")
    mcp_log.addHandler(logged)
    server_pids: list[int] = []

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            errors.append(message)

    async def main() -> None:
        with open(tmp_path / "server-stderr.log", "w") as errlog:
            async with (
                stdio_client(params(tmp_path), errlog=errlog) as streams,
                ClientSession(*streams, message_handler=on_message) as session,
            ):
                with anyio.fail_after(HANG_SECONDS):
                    await session.initialize()
                    server_pids.extend(server_of(tmp_path))
                    await body(session)

    try:
        anyio.run(main)
    finally:
        mcp_log.removeHandler(logged)
    assert errors == [] and logged.records == []
    assert len(server_pids) == 1
    assert wait_until(lambda: owned_processes(server_pids[0]) == [], timeout=10)


def test_sdk_handshake_and_tool_list(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        init = await session.initialize()
        assert init.server_info.name == "bashrpc"
        assert init.protocol_version == "2025-11-25"
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["bash", "bash_output", "bash_kill", "bash_input"]
        bash = tools.tools[0]
        assert "command" in bash.input_schema["properties"]
        assert bash.title == messages.BASH_TOOL_TITLE
        assert bash.annotations is not None and bash.annotations.destructive_hint is True
        assert bash.annotations.open_world_hint is True

    run_sdk(tmp_path, body)


def test_sdk_tool_call_has_text_and_structured_content(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
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
            "queuedSeconds": 0.0,
        }

    run_sdk(tmp_path, body)


def test_sdk_failing_and_timed_out_calls_are_tool_errors(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        failed = await session.call_tool("bash", {"command": "echo nope; (exit 3)"})
        assert failed.is_error
        assert text(failed) == "nope\n\n" + messages.EXITED_WITH_CODE.format(code=3)
        timed = await session.call_tool("bash", {"command": "sleep 30", "timeout": 1})
        assert timed.is_error and text(timed).startswith(messages.timed_out_notice(1))

    run_sdk(tmp_path, body)


def test_sdk_big_output_is_a_listed_readable_resource(tmp_path: Path) -> None:
    async def body(session: ClientSession) -> None:
        from mcp.types import TextResourceContents

        big = await session.call_tool("bash", {"command": "seq 1 100000"})
        assert big.structured_content is not None
        artifact = big.structured_content["truncation"]["artifactId"]
        resource = await session.read_resource(f"artifact://{artifact}")
        content = resource.contents[0]
        assert isinstance(content, TextResourceContents), content
        assert str(content.uri) == f"artifact://{artifact}"
        assert content.text == "".join(f"{i}\n" for i in range(1, 100001))
        # 2025-06-18 on: the artifact is also a link beside the text.
        link = big.content[1]
        assert link.type == "resource_link" and str(link.uri) == f"artifact://{artifact}"
        listed = await session.list_resources()
        assert f"artifact://{artifact}" in {str(r.uri) for r in listed.resources}

    run_sdk(tmp_path, body)


def test_sdk_cancelled_call_is_killed_silently_and_the_next_call_says_so(
    tmp_path: Path,
) -> None:
    """A call the client gives up on (the 2.x SDK then sends `notifications/cancelled`)
    gets no response; its command is killed, and the next call says the cancelled one
    took the shell's state with it."""

    run_sdk(tmp_path, cancel_a_running_call)


async def cancel_a_running_call(session: ClientSession) -> None:
    """Give up on a running call; the next call and a ping are answered."""
    await give_up_on_a_call(session)
    # It waits its turn behind the cancelled call, whose shell is killed.
    again = await session.call_tool("bash", {"command": "echo still healthy"})
    assert text(again) == f"{messages.SHELL_RESTARTED}\nstill healthy\n"
    assert await session.send_ping() is not None


async def give_up_on_a_call(client: Any) -> None:
    """Start a long call through `client` (a session or a Client), and cancel it
    once its output shows it runs."""
    started = anyio.Event()

    # Named as the SDK's progress callback protocol names them.
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: client.call_tool(
                "bash", {"command": "echo started; sleep 60"}, progress_callback=progress
            )
        )
        await started.wait()
        tg.cancel_scope.cancel()


def server_of(tmp_path: Path) -> list[int]:
    """Pids of the bashrpc servers this test started (their artifacts are in `tmp_path`)."""
    me = os.getpid()
    return [
        pid
        for pid in live_pids()
        if (stat := proc_stat(pid)) is not None
        and stat[1] == me
        and "-m bashrpc" in (line := cmdline(pid))
        and str(tmp_path) in line
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


def run_mcp1_client(script: Path, tmp_path: Path, *args: str, url: str | None = None) -> Any:
    """Run a client script under the 1.x SDK against a bashrpc server; its JSON report."""
    return run_client([str(mcp1_python()), str(script)], tmp_path, *args, url=url)


def run_client(
    interpreter_and_script: list[str], tmp_path: Path, *args: str, url: str | None = None
) -> Any:
    """Run a client script against a bashrpc server of its own (or, given a `url`,
    the Streamable HTTP listener there); its JSON report."""
    server = [sys.executable, str(tmp_path / "artifacts")] if url is None else [url]
    done = subprocess.run(
        [*interpreter_and_script, *server, *args],
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
    assert report["raised"] is None
    assert report["pinged"] is True


@pytest.mark.slow
def test_mcp_1x_client_cancels_with_no_error(tmp_path: Path) -> None:
    """A call cancelled with `notifications/cancelled` gets no response, which the 1.x
    SDK would report as one to an unknown request id; the next call says the shell
    restarted."""
    report = run_mcp1_client(ABANDONING_CLIENT_SCRIPT, tmp_path, "cancel")
    assert report["raised"] is None
    assert report["errors"] == []
    assert report["next"] == f"{messages.SHELL_RESTARTED}\nstill healthy\n"
