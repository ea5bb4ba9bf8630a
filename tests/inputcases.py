"""The commands that wait for their person, and the busy ones that must never be
taken for waiting (the list of the input issue), each run on a PTY through a
real server: `tests/e2e/test_input_waits.py` asserts on them, and the bench
times the waits' detection.

Each case is shell text run in a fresh directory (`setup` first, on pipes);
`needs` names the programs it runs, and a case whose program is missing skips."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol.client import notification_params
from bashrpc.protocol.mcp import (
    LATEST_PROTOCOL_VERSION,
    BashOverrides,
    ConnectionSettings,
    HostOptions,
    Implementation,
    InitializeParams,
    InitializeResult,
    UiSize,
)
from bashrpc.protocol.methods import BashParams, NeedsInput, PtyOutput
from tests.githost import NOBODY, as_nobody, nobody_interpreter
from tests.rpc import RpcClient, ServerProcess
from tests.sandboxing import skip_without_sandbox

# Generous: a wait is told about a settle time (1 s) after its prompt.
BOUND_SECONDS = 30.0
# How often the client looks up from its messages (to abort a case on time).
POLL_SECONDS = 0.2


class Case(msgspec.Struct, frozen=True):
    name: str
    command: str
    secret: bool = False
    needs: tuple[str, ...] = ()
    setup: str = ""
    # Why it cannot run here, whatever is installed.
    skip: str = ""
    # Busy cases: run this long at most, then are aborted (sleep infinity).
    run_for: float | None = None
    # Where it runs, under the case's directory (after `setup`).
    cwd: str = ""
    # A glob of what the program, ended by the abort, leaves outside that
    # directory: what matches it afterwards and did not before is removed.
    leaves: str = ""


REPO = (
    "git init -q r && cd r && git config user.email t@t && git config user.name t"
    " && echo a > a && git add a && git commit -qm one && echo b >> a && git commit -qam two"
)
SLOW_SERVER = (
    "python3 -c 'import http.server,time\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    '        time.sleep(3); self.send_response(200); self.end_headers(); self.wfile.write(b"ok")\n'
    's=http.server.HTTPServer(("127.0.0.1",0),H); open("port","w").write(str(s.server_port))\n'
    "s.handle_request()' & while [ ! -s port ]; do sleep 0.1; done;"
)
MAKEFILE = (
    "printf 'int f%s(void){return %s;}\\n' 1 1 > a.c"
    " && printf 'int f%s(void){return %s;}\\n' 2 2 > b.c"
    " && printf 'int main(void){return 0;}\\n' > m.c"
    " && printf 'all: a.o b.o m.o\\n\\tcc -o p a.o b.o m.o\\n' > Makefile"
)
# A distribution pip finds on PYTHONPATH and may uninstall (nothing of the system's:
# hence --break-system-packages, which a distribution's own Python asks for).
FAKE_DIST = (
    "mkdir -p site/fakepkg-1.0.dist-info && touch site/fakepkg.py"
    " && printf 'Metadata-Version: 2.1\\nName: fakepkg\\nVersion: 1.0\\n'"
    " > site/fakepkg-1.0.dist-info/METADATA"
    " && printf 'fakepkg.py,,\\n' > site/fakepkg-1.0.dist-info/RECORD"
)
ROOT_ONLY = "" if os.geteuid() == 0 else "runs as root (it asks root's password)"

WAITING = [
    Case("read-p", "read -p 'Name: ' x"),
    Case("read-s", "read -s -p 'Password: ' x", secret=True),
    Case("python-input", "python3 -c 'input(\"Name: \")'", needs=("python3",)),
    Case("getpass", "python3 -c 'import getpass; getpass.getpass()'", True, ("python3",)),
    # Root is never asked: root runs it as nobody, on a terminal of su's (-P).
    Case(
        "sudo",
        "su -P -s /bin/bash nobody -c 'sudo -k true'",
        True,
        ("sudo", "su"),
        skip=ROOT_ONLY,
    ),
    Case(
        "ssh-host-key",
        'ssh -p "$(cat ../sshd/port)" -o UserKnownHostsFile=kh root@127.0.0.1 true',
        needs=("ssh", "sshd"),
    ),
    Case(
        "ssh-password",
        'ssh -p "$(cat ../sshd/port)" -o UserKnownHostsFile=/dev/null'
        " -o StrictHostKeyChecking=no -o PubkeyAuthentication=no nobody@127.0.0.1 true",
        True,
        ("ssh", "sshd"),
    ),
    Case("ssh-keygen", "ssh-keygen -q -f key", True, ("ssh-keygen",)),
    Case(
        "gpg",
        "gpg --homedir g --pinentry-mode loopback --symmetric f",
        True,
        ("gpg",),
        setup="mkdir -m 700 g && echo x > f",
    ),
    Case(
        "git-commit",
        "git -c core.editor=vim commit --allow-empty",
        needs=("git", "vim"),
        setup=REPO,
        cwd="r",
    ),
    Case(
        "git-rebase-i",
        "git -c core.editor=vim rebase -i HEAD~1",
        needs=("git", "vim"),
        setup=REPO,
        cwd="r",
    ),
    Case("git-add-p", "echo c >> a && git add -p", needs=("git",), setup=REPO, cwd="r"),
    Case("npm-init", "npm init --yes=false", needs=("npm",)),
    # The server turns pip's prompts off (PIP_NO_INPUT); a user may turn them on.
    Case(
        "pip-uninstall",
        "env -u PIP_NO_INPUT PYTHONPATH=site"
        " python3 -m pip uninstall --break-system-packages fakepkg",
        needs=("python3",),
        setup=FAKE_DIST,
    ),
    # It asks before it downloads anything; the case ends at the question. Without
    # dpkg's lock, which another run of the suite (or apt itself) may hold meanwhile.
    Case(
        "apt-get-install",
        "apt-get -o Debug::NoLocking=true install emacs-nox",
        needs=("apt-get",),
        skip=ROOT_ONLY,
    ),
    Case("rm-i", "rm -i f", setup="touch f"),
    Case("cp-i", "cp -i a b", setup="touch a b"),
    Case("mv-i", "mv -i a b", setup="touch a b"),
    Case("passwd", "passwd nobody", True, ("passwd",), skip=ROOT_ONLY),
    Case("mysql-style", "stty -echo; printf 'Enter password: '; read x", secret=True),
    Case("less", "less f", needs=("less",), setup="seq 1000 > f"),
    Case("man", "man -P less bash", needs=("man",)),
    Case("python-repl", "python3", needs=("python3",)),
    Case("node-repl", "node", needs=("node",)),
    Case("bc", "bc", needs=("bc",)),
    Case("ftp-style", "python3 -c 'while True: print(input(\"ftp> \"))'", needs=("python3",)),
    Case("top", "top", needs=("top",)),
    Case("vim", "vim f", needs=("vim",)),
    Case("nano", "nano f", needs=("nano",)),
    # Debian's crontab edits in /tmp whatever TMPDIR says.
    Case("crontab-e", "crontab -e", needs=("crontab",), skip=ROOT_ONLY, leaves="/tmp/crontab.*"),
]

BUSY = [
    Case("sleep", "sleep 5"),
    Case("wait", "sleep 3 & wait"),
    Case("make", "make -j2", needs=("make", "cc"), setup=MAKEFILE),
    Case(
        "python-compute",
        "python3 -c 'import time\nt=time.time()\nwhile time.time()-t<4: pass'",
        needs=("python3",),
    ),
    Case(
        "curl-slow",
        SLOW_SERVER + ' curl -s "http://127.0.0.1:$(cat port)/"',
        needs=("curl", "python3"),
    ),
    Case("fifo", "mkfifo p; (for i in 1 2 3; do sleep 1; echo $i; done > p) & cat p"),
    Case(
        "tail-f",
        "(for i in 1 2 3; do sleep 1; echo $i >> f; done) & timeout 4 tail -f f",
        needs=("timeout",),
        setup="touch f",
    ),
    Case("git-clone", "git clone -q r c && sleep 2", needs=("git",), setup=REPO),
    Case(
        "slow-test",
        "python3 -m unittest -q t",
        needs=("python3",),
        setup="printf 'import time,unittest\\nclass T(unittest.TestCase):\\n"
        "    def test(self): time.sleep(3)\\n' > t.py",
    ),
    Case("find", "timeout 4 find / -xdev > /dev/null 2>&1; true", needs=("timeout",)),
    Case("sha256", "yes | head -c 100M | sha256sum"),
    Case("slow-pipe", "(sleep 1; echo a; sleep 1; echo b; sleep 1) | cat"),
    Case("flock", "flock l sleep 3 & sleep 0.3; flock l true", needs=("flock",), setup="touch l"),
    Case("nc-listen", "timeout 3 nc -l 127.0.0.1 47123; true", needs=("nc", "timeout")),
    Case("sleep-infinity", "sleep infinity", run_for=4.0),
    Case("compile", "cc -O2 -o p m.c && sleep 1", needs=("cc",), setup=MAKEFILE),
    Case("watch-loop", "for i in 1 2 3 4; do date; sleep 1; done"),
    Case("ping", "ping -c 3 127.0.0.1", needs=("ping",)),
    Case("dd", "dd if=/dev/zero of=/dev/null bs=64k count=400000"),
    Case(
        "expect",
        "expect -c 'spawn bash -c {read -p Name: x; sleep 1; echo hi $x}; "
        "expect Name:; send bob\\r; expect eof'",
        needs=("expect",),
    ),
]


@contextmanager
def sandboxed_server(user: str) -> Iterator[tuple[ServerProcess, Path]]:
    """A server in `workspace-write`, run by root (`server-user`) or by uid 65534
    (`uid-65534`, whose server reads only its own processes' /proc), and its
    workspace; skipped where the sandbox, or that user, cannot be had."""
    skip_without_sandbox()
    nobody = user == "uid-65534"
    if nobody and os.geteuid() != 0:
        pytest.skip("running a server as uid 65534 needs root")
    workspace = Path(tempfile.mkdtemp(prefix="bashrpc-input-"))
    (workspace / "home").mkdir()
    if nobody:
        for path in (workspace, workspace / "home"):
            os.chown(path, NOBODY, NOBODY)
    server = ServerProcess(
        "--sandbox",
        "workspace-write",
        tmp=workspace,
        preexec_fn=as_nobody if nobody else None,
        interpreter=nobody_interpreter() if nobody else (sys.executable,),
    )
    try:
        yield server, workspace
    finally:
        server.kill()
        shutil.rmtree(workspace, ignore_errors=True)


def on_a_terminal(server: RpcClient) -> None:
    """`initialize` as a host with a UI and `virtualTerminal` on: tool calls run on a PTY."""
    on = HostOptions(
        ui=UiSize(cols=100, rows=30),
        settings=ConnectionSettings(bash=BashOverrides(virtual_terminal="on")),
    )
    initialize = InitializeParams(
        protocol_version=LATEST_PROTOCOL_VERSION,
        client_info=Implementation(name="test", version="0"),
        initialization_options=on,
    )
    server.typed(InitializeResult, "initialize", initialize)


def missing(case: Case) -> str:
    """Why the case cannot run here; empty when it can."""
    if case.skip:
        return case.skip
    absent = [
        p for p in case.needs if shutil.which(p) is None and not os.path.exists(f"/usr/sbin/{p}")
    ]
    return f"not installed: {' '.join(absent)} (.ci/run installs it)" if absent else ""


class Seen(msgspec.Struct):
    """What a case's request told: its wait (if any), how long after the
    terminal's last bytes it came, and how the command ended."""

    wait: NeedsInput | None
    after_output: float | None
    ended: bool


def run_case(server: RpcClient, case: Case, cwd: str, first_wait_ends: bool = True) -> Seen:
    """Run the case on a PTY; a told wait ends it (abort), as does `run_for`;
    then remove what the ended program left (`leaves`)."""
    left_before = set(glob.glob(case.leaves)) if case.leaves else set()
    try:
        return _run(server, case, cwd, first_wait_ends)
    finally:
        if case.leaves:
            for path in set(glob.glob(case.leaves)) - left_before:
                shutil.rmtree(path)


def _run(server: RpcClient, case: Case, cwd: str, first_wait_ends: bool) -> Seen:
    ident = server.request(
        "bash", BashParams(command=case.command, pty=True, cwd=cwd, timeout=BOUND_SECONDS)
    )
    last_output = time.monotonic()
    deadline = last_output + BOUND_SECONDS
    stop_at = None if case.run_for is None else last_output + case.run_for
    while time.monotonic() < deadline:
        if stop_at is not None and time.monotonic() > stop_at:
            server.abort(request_id=ident)
            stop_at = None
        try:
            message = server.next_message(POLL_SECONDS)
        except TimeoutError:
            continue
        if message.method == "pty/output":
            if notification_params(message, PtyOutput).request_id == ident:
                last_output = time.monotonic()
        elif message.method == "bash/needsInput":
            wait = notification_params(message, NeedsInput)
            if wait.request_id == ident:
                told_after = time.monotonic() - last_output
                if first_wait_ends:
                    server.abort(request_id=ident)
                server.response(ident, BOUND_SECONDS)
                return Seen(wait, told_after, True)
        elif message.id == ident:
            return Seen(None, None, True)
    return Seen(None, None, False)
