"""The interceptor through `tools/call`: each simple command of a real parse is judged."""

from __future__ import annotations

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import ConnectionSettings, InterceptorOverrides, InterceptorRule, Recovery
from tests.e2e.test_tools import (
    ALL_TOOLS,
    INTERCEPTING,
    blocked,
    call_tool,
    initialize,
    text_of,
)
from tests.inprocess import InProcessServer


def intercepting_with(rules: list[InterceptorRule]) -> ConnectionSettings:
    """The interceptor on, with these rules instead of the defaults."""
    return ConnectionSettings(interceptor=InterceptorOverrides(enabled=True, rules=rules))


@pytest.fixture
def guarded(server: InProcessServer) -> InProcessServer:
    initialize(server, tool_names=ALL_TOOLS, settings=INTERCEPTING)
    return server


@pytest.mark.parametrize(
    ("command", "recovery"),
    [
        ("cd pkg && cat package.json", Recovery(tool="read", path="pkg/package.json")),
        ("cat package.json", Recovery(tool="read", path="package.json")),
        ("true; head -n 5 src/a.py", Recovery(tool="read", path="src/a.py")),
        ("make || less notes.txt", Recovery(tool="read", path="notes.txt")),
        ("sleep 1 & tail -f log.txt", Recovery(tool="read", path="log.txt")),
        ("true\ncat README.md", Recovery(tool="read", path="README.md")),
        ("FOO=1 BAR='a b' cat x.txt", Recovery(tool="read", path="x.txt")),
        ("<&3 cat x.txt", Recovery(tool="read", path="x.txt")),
        ("sudo -u me cat /etc/hosts", Recovery(tool="read", path="/etc/hosts")),
        ("(cd a && grep -rn TODO src)", Recovery(tool="grep", pattern="TODO", path="a/src")),
        ("ls && rg -e needle", Recovery(tool="grep", pattern="needle")),
        ("find . -name '*.py'", Recovery(tool="find", pattern="*.py", path=".")),
        ("sed -ni.bak 's/a/b/' f.txt", Recovery(tool="edit", path="f.txt")),
        ("perl -pi -e 's/a/b/' f.txt", Recovery(tool="edit", path="f.txt")),
        ("echo hi >| out.txt", Recovery(tool="write", path="out.txt")),
        ("echo a && echo b > out.txt", Recovery(tool="write", path="out.txt")),
        ("cat <<'EOF' > out.txt\nbody\nEOF", Recovery(tool="write", path="out.txt")),
        ("printf x 2>/dev/null >> out.txt", Recovery(tool="write", path="out.txt")),
    ],
)
def test_each_simple_command_is_judged(
    guarded: InProcessServer, command: str, recovery: Recovery
) -> None:
    result = call_tool(guarded, command=command)
    assert result.is_error
    hint = msgspec.json.encode(recovery).decode()
    assert text_of(result).endswith(f"\n\nStructured recovery: {hint}")
    assert blocked(result).recovery == recovery
    assert blocked(result).suggested_tool == recovery.tool


def test_recovery_paths_include_the_calls_cwd(guarded: InProcessServer) -> None:
    (guarded.tmp / "sub").mkdir()
    result = call_tool(guarded, command="cd pkg && cat package.json", cwd="sub")
    assert blocked(result).recovery == Recovery(tool="read", path="sub/pkg/package.json")


def test_commands_that_only_look_like_interceptable_ones_run(guarded: InProcessServer) -> None:
    """Pipelines continued over a newline, quoted arrows, redirections to devices
    and descriptors, and commands feeding another's arguments all run."""
    commands = {
        "printf 'x\\n' |\n  grep x": "x\n",
        "printf 'x\\n' | # keep only x\n  grep -c x": "1\n",
        "echo '->' \"<p>\"": "-> <p>\n",
        "echo quiet > /dev/null; echo shown": "shown\n",
        "echo to-tty-less 2>&1": "to-tty-less\n",
        "echo err >&2; echo ok": "err\nok\n",
        'x=$(cat /dev/null); echo "[$x]"': "[]\n",
        "true && echo 'git commit -m \"cat file\"'": 'git commit -m "cat file"\n',
        "cat <<EOF\nhello\nEOF": "hello\n",
    }
    for command, output in commands.items():
        result = call_tool(guarded, command=command)
        assert not result.is_error, command
        assert text_of(result) == output, command


def test_custom_rules_match_each_simple_command(server: InProcessServer) -> None:
    rules = [
        InterceptorRule(pattern=r"^git\s+commit", tool="commit", message="Use commit.", name="gc"),
        InterceptorRule(pattern="(unclosed", tool="commit", message="never"),
    ]
    initialize(server, tool_names=["commit"], settings=intercepting_with(rules))
    result = call_tool(server, command="npm test && git commit -m x")
    assert blocked(result).rule == "gc"
    assert text_of(result) == (
        "Blocked: Use commit.\n\nOriginal command: npm test && git commit -m x\n\n"
        'Structured recovery: {"tool":"commit"}'
    )
    # Quoted, `git commit` is an argument, not a command.
    assert text_of(call_tool(server, command="echo 'git commit'")) == "git commit\n"
    warning = messages.INTERCEPT_BAD_RULE.format(pattern="(unclosed", reason="")
    assert server.stderr().count(warning.split(":")[0]) == 1


def test_custom_rules_match_the_whole_command_too(server: InProcessServer) -> None:
    rules = [InterceptorRule(pattern=r"^git add file && git commit", tool="commit", message="m")]
    initialize(server, tool_names=["commit"], settings=intercepting_with(rules))
    result = call_tool(server, command="git add file && git commit -m message")
    assert blocked(result).rule == rules[0].pattern
