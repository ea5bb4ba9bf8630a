"""Starting, stopping and the promise that nothing outlives the server."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.methods import AbortBashParams, BashParams
from bashrpc.server.output.artifactroot import workspace_key
from tests.conftest import SpawnProcess
from tests.rpc import ServerProcess, owned_processes, wait_until

# Every case here starts processes of its own: slow (see tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture
def server(process: ServerProcess) -> ServerProcess:
    """Everything here is about the process itself: stdio, signals, exit, the CLI."""
    return process


@pytest.fixture
def spawn(spawn_process: SpawnProcess) -> SpawnProcess:
    return spawn_process


ESCAPES = (
    "sleep 300 & nohup sleep 301 >/dev/null 2>&1 & setsid sleep 302 & "
    "(setsid sleep 303 &); sleep 304 & disown; echo spawned"
)
# Shutdown promises 3 s; the bound only catches a hang.
EXIT_BOUND_SECONDS = 10.0


def start_escapees(server: ServerProcess) -> None:
    assert server.bash(ESCAPES).output == "spawned\n"
    server.bash("sleep 305 &", session_id="other")
    assert wait_until(
        lambda: len([c for c in server.owned_commands() if c.startswith("sleep 30")]) == 6
    )


def assert_all_gone(server_pid: int) -> None:
    assert wait_until(lambda: owned_processes(server_pid) == [], timeout=5)


def test_eof_shuts_down_and_kills_everything(server: ServerProcess) -> None:
    start_escapees(server)
    running = server.request("bash", BashParams(command="sleep 60"))
    time.sleep(0.2)
    started = time.monotonic()
    assert server.close(timeout=EXIT_BOUND_SECONDS) == 0
    assert time.monotonic() - started < 10  # shutdown's 1 s grace, not the 60 s sleep
    assert_all_gone(server.server_pid)
    # The aborted command was still answered before the exit.
    assert server.bash_result(running, timeout=1).cancelled


def test_shutdown_then_exit(server: ServerProcess) -> None:
    start_escapees(server)
    reply = server.call("shutdown")
    assert reply.error is None and bytes(reply.result) == b"null"
    assert_all_gone(server.server_pid)
    late = server.error("bash", BashParams(command="echo late"))
    assert late.code == ErrorCode.SHUTTING_DOWN
    server.notify("exit")
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_cleanly(server: ServerProcess, sig: signal.Signals) -> None:
    start_escapees(server)
    server.proc.send_signal(sig)
    assert server.proc.wait(timeout=EXIT_BOUND_SECONDS) == 0
    assert_all_gone(server.server_pid)


@pytest.mark.stdio_only("a daemon's runtime directory outlives each connection, by design")
def test_temporary_files_are_removed_and_artifacts_kept(
    spawn: SpawnProcess, tmp_path: Path
) -> None:
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    server = spawn(env={"TMPDIR": str(private_tmp)})
    result = server.bash("seq 1 100000")
    runtime = list(private_tmp.iterdir())
    assert len(runtime) == 1 and runtime[0].name.startswith("bashrpc-")
    assert oct(runtime[0].stat().st_mode & 0o777) == oct(0o700)
    assert server.close(timeout=EXIT_BOUND_SECONDS) == 0
    assert list(private_tmp.iterdir()) == []
    assert (server.artifacts_dir / f"{result.artifact_id}.bash.log").is_file()


def test_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cases = {
        "[output]\nmaxBytes = 'big'\n": "$.output.maxBytes",
        "colour = 1\n": "colour",
        "[kill]\ngraceSeconds = -1\n": "$.kill.graceSeconds",
        "not toml [": "config",
        "[env]\n'BAD NAME' = '1'\n": "$.env",
    }
    for text, needle in cases.items():
        cfg.write_text(text)
        proc = subprocess.run(
            [sys.executable, "-m", "bashrpc", "--config", str(cfg)],
            input=b"",
            capture_output=True,
            timeout=EXIT_BOUND_SECONDS,
        )
        assert proc.returncode == 2, text
        assert proc.stdout == b""
        lines = proc.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (text, lines)
    missing = subprocess.run(
        [sys.executable, "-m", "bashrpc", "--config", str(tmp_path / "nope.toml")],
        input=b"",
        capture_output=True,
        timeout=EXIT_BOUND_SECONDS,
    )
    assert missing.returncode == 2 and b"not found" in missing.stderr


def test_config_values_take_effect(spawn: SpawnProcess, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "prefix = 'LANG_TEST=on'\n[env]\nFROM_CONFIG = 'yes'\n[output]\nmaxBytes = 2048\n"
        f"[artifacts]\ndir = '{tmp_path}/cfg-artifacts'\n"
    )
    server = spawn("--config", str(cfg), artifacts=False)
    result = server.bash("echo $FROM_CONFIG; env | grep -c LANG_TEST; seq 1 2000")
    assert result.output.endswith("2000\n") and result.truncated
    assert result.output_bytes <= 2048
    # The workspace's directory on stdio; behind `attach`, the tenant's beside it.
    pattern = f"{glob.escape(workspace_key(tmp_path))}*/{result.artifact_id}.bash.log"
    assert len(list((tmp_path / "cfg-artifacts").glob(pattern))) == 1


def test_default_config_file_is_read(spawn: SpawnProcess, tmp_path: Path) -> None:
    (tmp_path / "config" / "bashrpc").mkdir(parents=True)
    (tmp_path / "config" / "bashrpc" / "config.toml").write_text("[env]\nDEFAULTED = 'from-xdg'\n")
    server = spawn()
    assert server.bash("echo $DEFAULTED").output == "from-xdg\n"


def test_excluded_variables_are_gone_from_the_servers_own_environment(
    spawn_process: SpawnProcess, tmp_path: Path
) -> None:
    """A command can read its parent's initial environment: the server starts again
    without the excluded variables, so /proc/$PPID/environ does not hold them."""
    cfg = tmp_path / "env.toml"
    cfg.write_text("[env]\nexclude = ['*TOKEN*']\n")
    server = spawn_process("--config", str(cfg), env={"BASHRPC_TEST_TOKEN": "ghp"})
    out = server.bash(f"[ $PPID = {server.server_pid} ] && tr '\\0' '\\n' < /proc/$PPID/environ")
    assert "BASHRPC_TEST_TOKEN" not in out.output and "PATH=" in out.output


def test_kill_grace_is_configurable(spawn: SpawnProcess, tmp_path: Path) -> None:
    cfg = tmp_path / "grace.toml"
    cfg.write_text("[kill]\ngraceSeconds = 0.3\n")
    server = spawn("--config", str(cfg))
    ident = server.request(
        "bash", BashParams(command="bash -c 'trap \"\" TERM; echo armed; sleep 60'")
    )
    server.wait_for(lambda m: m.method == "bash/chunk")
    started = time.monotonic()
    server.result("abort_bash", AbortBashParams(request_id=ident))
    assert server.bash_result(ident).cancelled
    # Below the default 2 s grace: the configured 0.3 s was used.
    assert time.monotonic() - started < 1.9
    assert not [c for c in server.owned_commands() if "sleep 60" in c]


def test_env_exclude_keeps_secrets_out_of_commands(spawn: SpawnProcess, tmp_path: Path) -> None:
    cfg = tmp_path / "env.toml"
    cfg.write_text("[env]\nexclude = ['*TOKEN*', '*_KEY']\nVISIBLE = 'yes'\n")
    secrets = {"GITHUB_TOKEN": "ghp", "OPENAI_API_KEY": "sk", "PLAIN": "ok"}
    server = spawn("--config", str(cfg), env=secrets)
    out = server.bash('echo "[$GITHUB_TOKEN][$OPENAI_API_KEY][$PLAIN][$VISIBLE]"').output
    assert out == "[][][ok][yes]\n"
    default = spawn(env=secrets)
    assert default.bash('echo "$GITHUB_TOKEN"').output == "ghp\n"
    cfg.write_text("[env]\nexclude = '*TOKEN*'\n")
    bad = subprocess.run(
        [sys.executable, "-m", "bashrpc", "--config", str(cfg)], input=b"", capture_output=True
    )
    assert bad.returncode == 2 and b"env.exclude" in bad.stderr


def test_commands_get_default_signals_whatever_the_server_inherited(spawn: SpawnProcess) -> None:
    def careless_parent() -> None:
        # What nohup, perf or an editor's launcher may leave a child: an ignored
        # signal (bash cannot even trap one ignored at entry) and blocked ones.
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH, signal.SIGUSR1})

    server = spawn(preexec_fn=careless_parent)
    check = "grep -E '^Sig(Blk|Ign)' /proc/self/status"
    defaults = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
    assert server.bash(check).output == defaults
    assert server.bash(check, pty=True).output == defaults
    # The server itself still shrugs off what its parent asked it to ignore.
    os.kill(server.pid, signal.SIGUSR2)
    assert server.bash("echo alive").output == "alive\n"
