"""Secrets never reach the host: one script prints 20 secrets in 20 ways, and
nothing the server wrote (stream, results, artifacts, PTY bytes and screen, job
output, stderr) holds any of their raw values or encodings."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.mcp import ProgressParams
from bashrpc.protocol.methods import (
    BashParams,
    BashResult,
    PtyInputParams,
    PtyOutput,
    PtyScreen,
    PtyScreenParams,
    PtySize,
    SecretsAddParams,
    SecretsAddResult,
    SecretValue,
    SessionCloseParams,
    SessionOpenParams,
    SessionOpenResult,
)
from bashrpc.protocol.terminals import (
    EnvVariable,
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
)
from bashrpc.server.output.secretforms import forms
from tests.conftest import SpawnInProcess
from tests.e2e.test_tools import call_tool, initialize, text_of, tool_call
from tests.e2e.test_traces import CONSOLE
from tests.inprocess import InProcessServer
from tests.rpc import RpcClient, ServerProcess, server_environment

SERVER_SECRET = "srv-Secret-Of-The-Server-42"
TOKEN = "tok-9f8e7d6c5b4a3210ZYXW"
MARKED = "Xy/9+tQ8=zz Km&q"
REGISTERED = "reg1stered-Secret-77Q"
GH = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
BEARER = "abc.DEF-123_xyz987"
URL_PASSWORD = "pa55-w0rd-Q"
SLACK = "xoxb-1234567890-0987654321-AbCdEfGhIjKl"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE = "AIzaSyA-1234567890abcdefghijklmnopqrstu"
OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = "sk-ant-api03-Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
GITLAB = "glpat-x9Y8z7W6v5U4t3S2r1Q0"
VALUES = [SERVER_SECRET, TOKEN, MARKED, REGISTERED]
TOKENS = [GH, AWS_ID, AWS_SECRET, JWT, PEM_BODY, BEARER, URL_PASSWORD]
TOKENS += [SLACK, STRIPE, GOOGLE, OPENAI, ANTHROPIC, GITLAB]

# Twenty ways. The pieces printed apart in time reach the streams (held at most a
# chunk interval) as a first piece and a marker, never whole (see the Secrets page).
SCRIPT = f"""
V="$DEPLOY_TOKEN"
echo "plain $V"
printf '%s' "${{V:0:7}}"; sleep 0.3; printf '%s\\n' "${{V:7}}"
for i in 1 2 3; do printf '\\r[%d/3] %s' "$i" "$V"; sleep 0.05; done; echo
printf '%s' "$V" | base64
printf 'x%s' "$V" | base64 -w0; echo
printf 'xy%s' "$V" | base64 -w0; echo
python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$PLAIN_VALUE"
python3 -c 'import sys,json;print(json.dumps({{"v":sys.argv[1]}}))' "$PLAIN_VALUE"
printf '%s\\e[31m%s\\e[0m\\n' "${{V:0:4}}" "${{V:4}}"
echo "to stderr $BACKUP_PASSWORD" >&2
for ((i=0;i<${{#V}};i++)); do printf '%s' "${{V:i:1}}"; done; echo
echo "registered: {REGISTERED}"
echo "GH={GH}"
echo "AWS_ACCESS_KEY_ID={AWS_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET}"
echo "Cookie: session={JWT}"
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n{PEM_BODY}\\n-----END OPENSSH PRIVATE KEY-----\\n'
echo "> Authorization: Bearer {BEARER}"
echo "origin https://deploy:{URL_PASSWORD}@git.example.com/r.git (fetch)"
echo "{SLACK} {STRIPE} {GOOGLE}"
echo "{OPENAI} {ANTHROPIC} {GITLAB}"
"""
FLOOD = 'for i in $(seq 4000); do echo "line $i $DEPLOY_TOKEN"; done'


def needles() -> list[bytes]:
    """Every raw value, and each value's encodings long enough to mean it."""
    found = {value.encode() for value in VALUES + TOKENS}
    for value in VALUES:
        found |= {form for form in forms(value.encode()) if len(form) >= 10}
    return sorted(found)


def pty_bytes(server: InProcessServer) -> bytes:
    """A PTY's raw bytes as the host gets them (base64 in `pty/output`)."""
    return b"".join(base64.b64decode(o.data) for o in server.notified("pty/output", PtyOutput))


def written(server: InProcessServer) -> bytes:
    """Everything the server wrote: its lines (a PTY's bytes decoded), its stderr,
    its artifacts' files."""
    parts = [*server.raw_lines, pty_bytes(server), server.stderr().encode()]
    if server.artifacts_dir.exists():
        parts += [path.read_bytes() for path in server.artifacts_dir.rglob("*") if path.is_file()]
    return b"\n".join(parts)


def assert_nothing_leaked(server: InProcessServer) -> None:
    everything = written(server)
    # JSON escapes a slash in no way msgspec writes, but decode \u escapes anyway.
    leaked = [needle for needle in needles() if needle in everything]
    assert leaked == []


@pytest.fixture
def secret_server(spawn: SpawnInProcess, tmp_path: Path) -> InProcessServer:
    (tmp_path / "script.sh").write_text(SCRIPT)
    server = spawn(env={"BACKUP_PASSWORD": SERVER_SECRET, "DEPLOY_TOKEN": TOKEN})
    added = server.typed(
        SecretsAddResult,
        "secrets/add",
        SecretsAddParams(secrets=[SecretValue(name="REGISTERED", value=REGISTERED)]),
    )
    assert added.added == 1
    return server


def run_script(server: RpcClient, tmp: Path, **fields: object) -> BashResult:
    params = BashParams(
        command=f"bash {tmp / 'script.sh'}",
        env={"PLAIN_VALUE": MARKED},
        secret_env=["PLAIN_VALUE"],
        **fields,  # type: ignore[arg-type]
    )
    return server.typed(BashResult, "bash", params)


def test_bash_on_pipes(secret_server: InProcessServer, tmp_path: Path) -> None:
    result = run_script(secret_server, tmp_path)
    assert result.exit_code == 0
    assert "plain [REDACTED:DEPLOY_TOKEN]" in result.output
    assert "to stderr [REDACTED:BACKUP_PASSWORD]" in result.output
    assert "[REDACTED:PLAIN_VALUE]" in result.output
    assert "registered: [REDACTED:REGISTERED]" in result.output
    assert "https://deploy:[REDACTED:url_password]@git.example.com" in result.output
    assert result.redactions is not None
    assert result.redactions["DEPLOY_TOKEN"] >= 9
    for name in ("github_token", "jwt", "private_key", "bearer_token", "aws_secret_access_key"):
        assert result.redactions[name] == 1, name
    assert_nothing_leaked(secret_server)


def test_a_quiet_commands_held_tail_streams_within_an_interval(
    secret_server: InProcessServer, tmp_path: Path
) -> None:
    """On pipes: the end of a read that may begin a secret is streamed once the
    command is quiet for a chunk interval, not held until its next read; the rest
    of the secret is still redacted, and the result waits for it whole."""
    go = tmp_path / "go"
    command = (
        f"printf 'key: %s' \"${{DEPLOY_TOKEN:0:7}}\"; until [ -e {go} ]; do sleep 0.05; done;"
        f" printf '%s\\n' \"${{DEPLOY_TOKEN:7}}\""
    )
    ident = secret_server.request("bash", BashParams(command=command))

    def streamed() -> str:
        return "".join(chunk.text for chunk in secret_server.chunks_for(ident))

    secret_server.receive_until(lambda: streamed() == f"key: {TOKEN[:7]}")
    go.touch()
    result = secret_server.bash_result(ident)
    assert result.output == "key: [REDACTED:DEPLOY_TOKEN]\n"
    assert streamed() == f"key: {TOKEN[:7]}[REDACTED:DEPLOY_TOKEN]\n"
    assert_nothing_leaked(secret_server)


def test_bash_on_a_pty_its_bytes_and_screen(secret_server: InProcessServer, tmp_path: Path) -> None:
    ident = secret_server.request(
        "bash",
        BashParams(
            command=f"bash {tmp_path / 'script.sh'}; read -r _",
            env={"PLAIN_VALUE": MARKED},
            secret_env=["PLAIN_VALUE"],
            pty=PtySize(cols=40, rows=50),
        ),
    )
    secret_server.receive_until(lambda: b"REDACTED:gitlab_token" in pty_bytes(secret_server))
    screen = secret_server.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
    shown = "\n".join(screen.lines)
    assert "[REDACTED:github_token]" in shown and GH[:20] not in shown
    secret_server.result("pty/input", _enter(ident))
    result = secret_server.bash_result(ident)
    assert "[REDACTED:DEPLOY_TOKEN]" in result.output
    assert_nothing_leaked(secret_server)


def _enter(ident: RequestId) -> PtyInputParams:
    return PtyInputParams(request_id=ident, keys=["enter"])


def test_a_secret_wrapped_over_screen_rows(secret_server: InProcessServer) -> None:
    ident = secret_server.request(
        "bash", BashParams(command=f"printf '{GH}'; read -r _", pty=PtySize(cols=16, rows=6))
    )
    secret_server.receive_until(lambda: b"github_token" in pty_bytes(secret_server))
    screen = secret_server.typed(PtyScreen, "pty/screen", PtyScreenParams(request_id=ident))
    assert screen.lines[0] == "[REDACTED:github_token]"
    assert not any(GH[16:32] in line for line in screen.lines)
    secret_server.result("pty/input", _enter(ident))
    secret_server.bash_result(ident)


def test_background_job_and_its_output(secret_server: InProcessServer, tmp_path: Path) -> None:
    params = TerminalCreateParams(
        session_id="jobs",
        command=f"bash {tmp_path / 'script.sh'}",
        env=[EnvVariable(name="PLAIN_VALUE", value=MARKED)],
        secret_env=["PLAIN_VALUE"],
    )
    job = secret_server.typed(TerminalCreateResult, "terminal/create", params).terminal_id
    ident = TerminalParams(session_id="jobs", terminal_id=job)
    assert secret_server.typed(TerminalWaitResult, "terminal/wait_for_exit", ident).exit_code == 0
    asked = TerminalOutputParams(session_id="jobs", terminal_id=job)
    output = secret_server.typed(TerminalOutputResult, "terminal/output", asked).output
    assert "plain [REDACTED:DEPLOY_TOKEN]" in output and "[REDACTED:PLAIN_VALUE]" in output
    assert_nothing_leaked(secret_server)


def test_bash_background_flag(secret_server: InProcessServer) -> None:
    result = secret_server.bash(FLOOD, background_after=30)
    assert "[REDACTED:DEPLOY_TOKEN]" in result.output
    assert_nothing_leaked(secret_server)


def test_an_artifact_sized_flood(secret_server: InProcessServer) -> None:
    result = secret_server.bash(FLOOD)
    assert result.truncated and result.artifact_id is not None
    assert result.redactions == {"DEPLOY_TOKEN": 4000}
    assert result.total_lines == 4000
    assert_nothing_leaked(secret_server)


def test_the_model_s_tool_call(secret_server: InProcessServer, tmp_path: Path) -> None:
    initialize(secret_server)
    text = text_of(call_tool(secret_server, f"bash {tmp_path / 'script.sh'}"))
    assert "plain [REDACTED:DEPLOY_TOKEN]" in text and "[REDACTED:github_token]" in text
    flood = text_of(call_tool(secret_server, FLOOD))
    assert "[REDACTED:DEPLOY_TOKEN]" in flood
    assert_nothing_leaked(secret_server)


def test_a_session_s_secret_env(secret_server: InProcessServer) -> None:
    opened = secret_server.typed(
        SessionOpenResult,
        "session/open",
        SessionOpenParams(session_id="s", env={"PLAIN_VALUE": MARKED}, secret_env=["PLAIN_VALUE"]),
    )
    result = secret_server.bash('echo "$PLAIN_VALUE"', session_id=opened.session_id)
    assert result.output == "[REDACTED:PLAIN_VALUE]\n"
    # Another session does not have it: nothing to redact there, and nothing printed.
    other = secret_server.bash(f"echo {base64.b64encode(b'plain').decode()}", session_id="t")
    assert other.redactions is None


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        (SecretsAddParams(secrets=[SecretValue(name="SHORT", value="1234567")]), "at least 8"),
        (
            SecretsAddParams(secrets=[SecretValue(name="no spaces", value="12345678")]),
            "not allowed",
        ),
    ],
)
def test_refused_secrets(server: InProcessServer, params: SecretsAddParams, reason: str) -> None:
    error = server.error("secrets/add", params)
    assert reason in error.message


def test_secret_env_refusals(server: InProcessServer) -> None:
    short = BashParams(command="true", env={"A": "short"}, secret_env=["A"])
    assert "at least 8" in server.error("bash", short).message
    missing = BashParams(command="true", secret_env=["NOPE"])
    assert "not in env" in server.error("bash", missing).message


def test_redact_false_only_where_allowed(spawn: SpawnInProcess) -> None:
    strict = spawn(env={"DEPLOY_TOKEN": TOKEN})
    refused = strict.error("bash", BashParams(command='echo "$DEPLOY_TOKEN"', redact=False))
    assert refused.message.endswith(messages.REDACT_OPT_OUT_REFUSED)
    lenient = spawn("[secrets]\nhostMayOptOut = true\n", env={"DEPLOY_TOKEN": TOKEN})
    assert lenient.bash('echo "$DEPLOY_TOKEN"', redact=False).output == TOKEN + "\n"
    assert lenient.bash('echo "$DEPLOY_TOKEN"').output == "[REDACTED:DEPLOY_TOKEN]\n"


def test_settings_turn_patterns_off_and_add_the_host_s(spawn: SpawnInProcess) -> None:
    server = spawn('[secrets]\npatterns = false\nextraPatterns = ["INTERNAL-[0-9]{6}"]\nenv = []\n')
    result = server.bash(f"echo {GH} INTERNAL-123456")
    assert result.output == f"{GH} [REDACTED:pattern_1]\n"


def test_the_recorded_transcript_holds_no_secret() -> None:
    """`bashrpc record` wrote this golden transcript (tests/transcripts/record.py):
    the host's values are gone from its requests as from the server's output."""
    golden = (Path(__file__).parents[1] / "transcripts" / "secrets_are_redacted.jsonl").read_bytes()
    for raw in (b"hunter2-hunter2", b"plain-secret-1", b"tok-0123456789"):
        assert raw not in golden
    assert b'"redactions":{"DEPLOY_KEY":1}' in golden


@pytest.mark.slow
def test_the_real_process_its_stderr_traces_and_exec(tmp_path: Path) -> None:
    """The server as a process, with spans and debug logs on stderr: nothing it
    writes anywhere holds a secret; nor does `bashrpc exec`'s output."""
    (tmp_path / "script.sh").write_text(SCRIPT)
    env = {**CONSOLE, "BACKUP_PASSWORD": SERVER_SECRET, "DEPLOY_TOKEN": TOKEN}
    server = ServerProcess("--log-level", "DEBUG", tmp=tmp_path, env=env)
    server.typed(
        SecretsAddResult,
        "secrets/add",
        SecretsAddParams(secrets=[SecretValue(name="REGISTERED", value=REGISTERED)]),
    )
    result = run_script(server, tmp_path)
    assert result.redactions and result.redactions["DEPLOY_TOKEN"] >= 9
    assert server.bash(FLOOD).truncated
    assert server.close() == 0
    assert "rpc.method" in server.stderr()  # the spans were written
    everything = b"\n".join(
        [*server.raw_lines, server.stderr().encode()]
        + [p.read_bytes() for p in server.artifacts_root.rglob("*") if p.is_file()]
    )
    assert [needle for needle in needles() if needle in everything] == []
    shown = subprocess.run(
        [sys.executable, "-m", "bashrpc", "exec", f"bash {tmp_path / 'script.sh'}"],
        capture_output=True,
        env=server_environment(tmp_path, env),
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert b"plain [REDACTED:DEPLOY_TOKEN]" in shown.stdout
    # exec's own server has no registered value: the script prints that one as it is.
    unregistered = forms(REGISTERED.encode())
    leaked = [n for n in needles() if n in shown.stdout + shown.stderr and n not in unregistered]
    assert leaked == []


def test_a_value_registered_while_a_command_runs_counts_from_then(
    server: InProcessServer, tmp_path: Path
) -> None:
    """What a host learns is secret mid-command (a password typed at a prompt) is
    redacted from that command's later output, and its session's later commands."""
    fifo = tmp_path / "later"
    os.mkfifo(fifo)
    ident = server.request("bash", BashParams(command=f"echo started; cat {fifo}"))
    server.receive_until(lambda: any(c.text == "started\n" for c in server.chunks_for(ident)))
    added = SecretsAddParams(
        secrets=[SecretValue(name="TYPED", value="typed-in-later-1")], session_id="default"
    )
    assert server.typed(SecretsAddResult, "secrets/add", added).added == 1
    fifo.write_text("typed-in-later-1\n")
    result = server.bash_result(ident)
    assert result.output == "started\n[REDACTED:TYPED]\n"
    assert result.redactions == {"TYPED": 1}
    assert server.bash("echo typed-in-later-1", session_id="other").output == "typed-in-later-1\n"


def test_a_session_s_secrets_go_with_it(server: InProcessServer) -> None:
    opened = SessionOpenParams(session_id="s", env={"PLAIN": MARKED}, secret_env=["PLAIN"])
    server.typed(SessionOpenResult, "session/open", opened)
    assert server.bash(f"echo '{MARKED}'", session_id="s").output == "[REDACTED:PLAIN]\n"
    server.call("session/close", SessionCloseParams(session_id="s"))
    assert server.bash(f"echo '{MARKED}'", session_id="s").output == MARKED + "\n"


def test_the_tool_call_s_progress_messages(secret_server: InProcessServer) -> None:
    initialize(secret_server)
    call = tool_call('echo "deploying with $DEPLOY_TOKEN"; sleep 1', progress_token="p")
    ident = secret_server.request("tools/call", call)
    progress = secret_server.wait_for(lambda m: m.method == "notifications/progress")
    secret_server.response(ident)
    assert progress.params is not None
    shown = msgspec.json.decode(progress.params, type=ProgressParams).message
    assert shown == "deploying with [REDACTED:DEPLOY_TOKEN]"
    assert_nothing_leaked(secret_server)
