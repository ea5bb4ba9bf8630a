"""A session's control channel belongs to the server alone: no program a command
runs, now or later, reads the driver's lines or its tokens, or writes a status
record, in a sandbox that holds it (`server/runtime/sandbox/sealed.py`), as root and as
an unprivileged user. Each attack here worked against every sandbox mode:

- the takeover: a background job opens the shell's control pipe through
  `/proc/<shell>/fd/10`, stops the shell once it waits for its next line,
  reads that line with its token, and answers the command itself;
- the forgery: a child reads the running command's token from the shell's
  memory (`/proc/$PPID/mem`) and writes that command's record.

And a command does not reach another session at all: not its shell, its jobs
nor its files.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bashrpc.protocol.methods import SandboxMode, SessionCloseParams, SessionOpenParams
from tests.githost import as_nobody, nobody_interpreter
from tests.rpc import ServerProcess, live_pids, proc_stat, wait_until
from tests.sandboxing import skip_without_sandbox

NOBODY = 65534
FORGED_STATUS = 42
FORGED_DIR = "/forged"
# The record a command's end writes, for FORGED_STATUS in FORGED_DIR, less its token.
FORGED_RECORD = f"b'\\x00{FORGED_STATUS}\\x00{FORGED_DIR}\\x00\\x00\\x00' + token + b'\\x00'"

# A job that takes the control pipe, then the shell's next line and its token.
TAKEOVER = f"""
import os, signal, sys, time
shell = os.getppid()
try:
    control = os.open(f"/proc/{{shell}}/fd/10", os.O_RDONLY)
except OSError as e:
    sys.exit(f"control pipe: {{os.strerror(e.errno)}}")
print("control pipe: opened", flush=True)
if os.fork():
    os._exit(0)
os.setsid()
quiet = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(quiet, fd)
# Until the shell waits in read(0, ...) for its next line: then stop it.
while open(f"/proc/{{shell}}/syscall").read().split()[:2] != ["0", "0x0"]:
    time.sleep(0.01)
os.kill(shell, signal.SIGSTOP)
line = b""
while not line.endswith(b"\\n"):
    line += os.read(control, 4096)
token = line.split()[-1]
with open(os.environ["SFIFO"], "wb") as fifo:
    fifo.write({FORGED_RECORD})
"""

# A child that reads the running command's token from the shell's memory: a word
# of 32 hex digits there, but for what the environment holds (xdist's run id).
FORGERY = f"""
import os, re, sys, time
shell = os.getppid()
try:
    memory = open(f"/proc/{{shell}}/mem", "rb", buffering=0)
    maps = open(f"/proc/{{shell}}/maps").read().splitlines()
except OSError as e:
    sys.exit(f"memory: {{os.strerror(e.errno)}}")
tokens, word = set(), re.compile(rb"(?<![0-9a-f])[0-9a-f]{{32}}(?![0-9a-f])")
for region in maps:
    span, perms = region.split()[:2]
    start, end = (int(x, 16) for x in span.split("-"))
    if perms.startswith("rw"):
        memory.seek(start)
        tokens.update(word.findall(memory.read(end - start)))
tokens -= {{value.encode() for value in os.environ.values()}}
print(f"memory: {{len(tokens)}} token(s)", flush=True)
for token in tokens:
    with open(os.environ["SFIFO"], "wb") as fifo:
        fifo.write({FORGED_RECORD})
# The command runs on: its own record must not come before the forged one is read.
time.sleep(60)
"""

# The shell's own subshell, through /proc, as the job would.
SUBSHELL = '( exec 3</proc/$$/fd/10 ) 2>/dev/null && echo "subshell: opened"; echo subshell: done'

Spawn = Callable[[SandboxMode], ServerProcess]

# The modes that hold, by user: `full` as root keeps root's capabilities.
HELD = [
    pytest.param("read-only", "server-user"),
    pytest.param("workspace-write", "server-user"),
    pytest.param("read-only", "uid-65534"),
    pytest.param("workspace-write", "uid-65534"),
    pytest.param("full", "uid-65534"),
]


@pytest.fixture
def spawn_as(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[[SandboxMode, str], ServerProcess]]:
    """Real servers, in a sandbox mode, run by the test's user or by uid 65534,
    each in a workspace of its own that holds the attacks' scripts."""
    skip_without_sandbox()
    started: list[tuple[ServerProcess, Path]] = []

    def start(mode: SandboxMode, user: str) -> ServerProcess:
        nobody = user == "uid-65534"
        if nobody and os.geteuid() != 0:
            pytest.skip("running a server as uid 65534 needs root")
        tmp = Path(tempfile.mkdtemp(prefix="bashrpc-channel-"))
        (tmp / "home").mkdir()
        (tmp / "takeover.py").write_text(TAKEOVER)
        (tmp / "forgery.py").write_text(FORGERY)
        if nobody:
            for path in (tmp, tmp / "home"):
                os.chown(path, NOBODY, NOBODY)
        server = ServerProcess(
            "--sandbox",
            mode,
            tmp=tmp,
            preexec_fn=as_nobody if nobody else None,
            interpreter=nobody_interpreter() if nobody else (sys.executable,),
        )
        started.append((server, tmp))
        return server

    try:
        yield start
    finally:
        for server, tmp in started:
            server.kill()
            shutil.rmtree(tmp, ignore_errors=True)


def stopped_under(server: ServerProcess) -> bool:
    """Whether a process the server started is stopped (SIGSTOP)."""
    for pid in live_pids():
        stat = proc_stat(pid)
        if stat is None or stat[0] != "T":
            continue
        ancestor = stat[1]
        while ancestor > 1 and ancestor != server.pid:
            parent = proc_stat(ancestor)
            ancestor = 0 if parent is None else parent[1]
        if ancestor == server.pid:
            return True
    return False


def run_attack(server: ServerProcess, script: str) -> str:
    """The attack, run by the server's own interpreter (one its user may run). The
    scripts need only the standard library, so the interpreter is named by its real
    path: a venv's link may sit in a folder the sandbox does not show (under /tmp,
    which is private there)."""
    argv = server.proc.args
    assert isinstance(argv, list)
    python = os.path.realpath(str(argv[0]))
    return f'SFIFO="$__bashrpc_sfifo" {python} {server.tmp / script}'


@pytest.mark.parametrize(("mode", "user"), HELD)
def test_a_background_job_cannot_take_over_its_session(
    spawn_as: Callable[[SandboxMode, str], ServerProcess], mode: SandboxMode, user: str
) -> None:
    server = spawn_as(mode, user)
    first = server.bash(f"{run_attack(server, 'takeover.py')}; {SUBSHELL}")
    if "control pipe: opened" in first.output:
        # The job has the pipe: once it has stopped the shell, it holds the next line.
        assert wait_until(lambda: stopped_under(server))
    # The next commands are the agent's, answered by their shell.
    for _ in range(2):
        real = server.bash("echo real; cd /")
        assert (real.output, real.exit_code, real.working_dir) == ("real\n", 0, "/"), real
        assert not real.shell_restarted
    assert "control pipe: Permission denied" in first.output, first.output
    assert "subshell: opened" not in first.output and "subshell: done" in first.output


@pytest.mark.parametrize(("mode", "user"), HELD)
def test_a_child_cannot_forge_its_command_record_from_the_shells_memory(
    spawn_as: Callable[[SandboxMode, str], ServerProcess], mode: SandboxMode, user: str
) -> None:
    server = spawn_as(mode, user)
    result = server.bash(f"{run_attack(server, 'forgery.py')}; echo after")
    assert (result.exit_code, result.working_dir) == (0, str(server.tmp)), result.output
    assert "memory: Permission denied" in result.output and result.output.endswith("after\n")
    assert server.bash("echo real").output == "real\n"


@pytest.mark.parametrize(("mode", "user"), HELD)
def test_a_command_cannot_reach_another_session(
    spawn_as: Callable[[SandboxMode, str], ServerProcess], mode: SandboxMode, user: str
) -> None:
    server = spawn_as(mode, user)
    server.result("session/open", SessionOpenParams(session_id="other"))
    marker = f"bashrpc-other-{os.getpid()}"
    # Waited for, bounded: the job is forked in the background and named when it runs.
    started = f"(exec -a {marker} sleep 300 &); for _ in {{1..200}}; do"
    started += f" pgrep -f {marker} >/dev/null && break; sleep 0.05; done"
    other = server.bash(f'{started}; dirname "$__bashrpc_in"; echo $$', session_id="other")
    other_dir, other_shell = other.output.split()
    # Its files are not there, and no process of it is (pkill's 1: none matched).
    looked = server.bash(f"ls {other_dir} 2>&1; pkill -f {marker}; echo pkill $?").output
    assert "No such file or directory" in looked and looked.endswith("pkill 1\n"), looked
    # The other session has its shell and its job.
    again = server.bash(f"echo $$; pgrep -f {marker}", session_id="other")
    assert len(again.output.split()) == 2 and not again.shell_restarted, again
    assert again.output.split()[0] == other_shell


@pytest.mark.parametrize(("mode", "user"), HELD)
def test_the_server_still_sees_and_ends_what_a_sealed_shell_started(
    spawn_as: Callable[[SandboxMode, str], ServerProcess], mode: SandboxMode, user: str
) -> None:
    """The server reads a sealed shell's /proc as before (as an unprivileged user, as
    the owner of the sandbox's user namespace): its jobs, a subshell's among them,
    are counted, and closing the session ends them all."""
    server = spawn_as(mode, user)
    started = server.bash("sleep 300 & (sleep 301; :) & echo started")
    assert started.output == "started\n"
    assert wait_until(lambda: server.sessions()["default"].background_jobs >= 2)

    def sleeping() -> list[str]:
        return [c for c in server.owned_commands() if c.startswith("sleep 30")]

    # The subshell counts as a job once forked; its `sleep` starts when it runs on.
    assert wait_until(lambda: len(sleeping()) == 2), sleeping()
    server.result("session/close", SessionCloseParams(session_id="default"))
    assert wait_until(lambda: server.owned_processes() == [])
