"""The user's shell setup (rc snapshot) and the lifecycle of sessions' shells."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from tests.rpc import process_gone, wait_until

# Snapshot generation has a 10 s deadline; this bound only catches a hang.
SNAPSHOT_BOUND_SECONDS = 10 + 10

RC = r"""
alias ll='echo "aliased ll"'
greet() { printf '<%s>' "$@"; echo " it's \"quoted\" \$HOME"; }
_hidden() { :; }
grep() { echo "shadowed grep"; }
alias ls='echo shadowed ls'
shopt -s globstar
set -o noclobber
export PATH="$HOME/rc-bin:$PATH"
"""


def write_rc(tmp: Path, text: str) -> None:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    (home / ".bashrc").write_text(text)


def config(tmp: Path, text: str) -> str:
    path = tmp / "settings.toml"
    path.write_text(text)
    return str(path)


def test_the_next_command_sees_the_users_shell(spawn, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn()
    out = server.bash(
        "ll; greet a 'b c'; shopt -q globstar && echo globstar;"
        ' [[ -o noclobber ]] && echo noclobber; echo "${PATH%%:*}"'
    )["output"]
    assert out == (
        f'aliased ll\n<a><b c> it\'s "quoted" $HOME\nglobstar\nnoclobber\n{tmp_path}/home/rc-bin\n'
    )
    # Names starting with _ and shadows of common tools are not carried over.
    out = server.bash("type -t _hidden || echo no-hidden; echo x | grep -c x; ls /dev/null")
    assert out["output"] == "no-hidden\n1\n/dev/null\n"
    assert server.stderr() == ""


def test_snapshot_file_is_private_and_removed_at_exit(spawn, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    private_tmp = tmp_path / "tmpdir"
    private_tmp.mkdir()
    server = spawn(env={"TMPDIR": str(private_tmp)})
    snapshot = Path(server.bash('printf %s "$BASHRPC_SNAPSHOT"')["output"])
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
    assert stat.S_IMODE(snapshot.parent.stat().st_mode) == 0o700
    assert "greet ()" in snapshot.read_text()
    assert server.close() == 0
    assert not snapshot.exists() and list(private_tmp.iterdir()) == []


def test_snapshot_can_be_turned_off(spawn, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn("--config", config(tmp_path, "[bash]\nsnapshot = false\n"))
    assert "command not found" in server.bash("ll")["output"]


def test_set_e_in_the_rc_is_not_carried_over(spawn, tmp_path: Path) -> None:
    write_rc(tmp_path, "set -e\nset -u\nalias ok='echo ok'\n")
    server = spawn()
    first = server.bash("false; echo after-false")
    assert first["output"] == "after-false\n" and first["exitCode"] == 0
    pid = server.result("session/list")["sessions"][0]["pid"]
    assert server.bash("ok")["output"] == "ok\n"
    assert server.result("session/list")["sessions"][0]["pid"] == pid


@pytest.mark.parametrize(
    ("name", "rc"),
    [
        ("echoes", "echo 'hello from rc'; printf 'noise\\n' >&2\nalias mark='echo marked'\n"),
        ("reads", "read -r line; read -r -p 'prompt? ' other\nalias mark='echo marked'\n"),
        ("exits", "alias mark='echo marked'\nexit 1\n"),
        ("loops", "while :; do :; done\n"),
        ("fancy prompt", "PS1='`date` $(whoami) \\u@\\h \\w'\nPROMPT_COMMAND='echo prompt'\n"),
    ],
)
def test_a_hostile_rc_never_breaks_the_server(spawn, tmp_path: Path, name: str, rc: str) -> None:
    write_rc(tmp_path, rc)
    server = spawn()
    started = time.monotonic()
    result = server.bash("echo works", wait=SNAPSHOT_BOUND_SECONDS)
    assert time.monotonic() - started < SNAPSHOT_BOUND_SECONDS
    assert result["output"] == "works\n" and result["exitCode"] == 0
    assert server.bash("echo again")["output"] == "again\n"
    if name == "loops":
        warnings = [line for line in server.stderr().splitlines() if "WARNING" in line]
        assert len(warnings) == 1 and "did not finish" in warnings[0]
    if "alias mark" in rc:
        assert server.bash("mark")["output"] == "marked\n"
    assert "hello from rc" not in result["output"] and "prompt" not in result["output"]


def test_least_recently_used_shell_is_evicted(spawn, tmp_path: Path) -> None:
    server = spawn("--config", config(tmp_path, "[sessions]\nmaxShells = 2\n"))
    pids = {}
    for session in ("a", "b", "c"):
        server.bash("true", sessionId=session)
        pids[session] = {
            s["sessionId"]: s["pid"] for s in server.result("session/list")["sessions"]
        }[session]
    assert wait_until(lambda: process_gone(pids["a"]))
    listed = {s["sessionId"]: s["pid"] for s in server.result("session/list")["sessions"]}
    assert listed == {"a": None, "b": pids["b"], "c": pids["c"]}
    # Session a still works: it gets a fresh shell, evicting b, now the least recent.
    assert server.bash("echo back", sessionId="a")["output"] == "back\n"
    assert wait_until(lambda: process_gone(pids["b"]))


def test_too_many_live_shells(spawn, tmp_path: Path) -> None:
    server = spawn("--config", config(tmp_path, "[sessions]\nmaxShells = 1\n"))
    busy = [server.request("bash", {"command": "sleep 3", "sessionId": s}) for s in ("a", "b")]
    time.sleep(0.5)
    reply = server.call("bash", {"command": "true", "sessionId": "c"})
    assert reply["error"]["code"] == ErrorCode.TOO_MANY_SHELLS
    assert reply["error"]["message"] == "too many live shells"
    for ident in busy:
        assert server.response(ident)["result"]["exitCode"] == 0
    assert server.bash("echo ok", sessionId="c")["output"] == "ok\n"


def test_idle_shell_is_closed(spawn, tmp_path: Path) -> None:
    server = spawn("--config", config(tmp_path, "[sessions]\nidleSeconds = 1\n"))
    server.bash("export KEPT=1")
    pid = server.result("session/list")["sessions"][0]["pid"]
    assert wait_until(lambda: process_gone(pid), timeout=10)
    assert server.result("session/list")["sessions"][0]["pid"] is None
    assert server.bash('echo "[$KEPT]"')["output"] == "[]\n"


def test_shell_with_background_jobs_survives_idle_eviction(spawn, tmp_path: Path) -> None:
    server = spawn("--config", config(tmp_path, "[sessions]\nidleSeconds = 1\n"))
    server.bash("sleep 300 &")
    server.bash("true", sessionId="plain")
    listed = {s["sessionId"]: s for s in server.result("session/list")["sessions"]}
    assert wait_until(lambda: process_gone(listed["plain"]["pid"]), timeout=10)
    time.sleep(1.5)
    listed = {s["sessionId"]: s for s in server.result("session/list")["sessions"]}
    assert listed["default"]["pid"] is not None and not process_gone(listed["default"]["pid"])
    assert listed["default"]["backgroundJobs"] == 1
    assert os.path.exists(f"/proc/{listed['default']['pid']}")


def test_pty_commands_see_the_users_shell_too(spawn, tmp_path: Path) -> None:
    write_rc(tmp_path, RC)
    server = spawn()
    out = server.bash("ll; [[ -o noclobber ]] && echo noclobber", pty=True)["output"]
    assert out == "aliased ll\nnoclobber\n"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SESSION_LIST_SESSIONS = 60
SESSION_LIST_CALLS = 20
# One scan of /proc is about 1 ms here; one per session was about 1 ms each.
SESSION_LIST_CPU_BOUND_SECONDS = 0.015


def test_session_list_scans_once_per_call(spawn, tmp_path: Path) -> None:
    server = spawn("--config", config(tmp_path, "[sessions]\nmaxShells = 64\n"))
    for i in range(SESSION_LIST_SESSIONS):
        server.bash("sleep 300 &" if i % 2 else "true", sessionId=f"s{i}")
    listed = server.result("session/list")["sessions"]
    jobs = {s["sessionId"]: s["backgroundJobs"] for s in listed}
    assert all(jobs[f"s{i}"] == i % 2 for i in range(SESSION_LIST_SESSIONS))
    before = cpu_seconds(server.pid)
    for _ in range(SESSION_LIST_CALLS):
        server.result("session/list")
    per_call = (cpu_seconds(server.pid) - before) / SESSION_LIST_CALLS
    assert per_call < SESSION_LIST_CPU_BOUND_SECONDS
