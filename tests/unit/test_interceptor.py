import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import InterceptorRule, Recovery
from bashrpc.server.services.tool.interceptor import DEFAULT_RULES, compile_rules, intercept

ALL_TOOLS = ["read", "grep", "find", "edit", "write"]
RULES = DEFAULT_RULES


def blocked_tool(command: str, tools: list[str] = ALL_TOOLS) -> str | None:
    block = intercept(command, RULES, tools)
    return None if block is None else block.tool


@pytest.mark.parametrize(
    ("command", "tool"),
    [
        ("cat README.md", "read"),
        ("head -n 20 src/main.py", "read"),
        ("tail -f log.txt", "read"),
        ("less file", "read"),
        ("cd src && more notes.txt", "read"),
        ("grep -rn TODO .", "grep"),
        ("rg foo", "grep"),
        ("ripgrep foo", "grep"),
        ("ag pattern src", "grep"),
        ("ack needle", "grep"),
        ("find . -name '*.py'", "find"),
        ("find src -type f", "find"),
        ("fd test", "find"),
        ("locate libc.so", "find"),
        ("sed -i 's/a/b/' file", "edit"),
        ("sed -i.bak 's/a/b/' file", "edit"),
        ("sed --in-place 's/a/b/' file", "edit"),
        ("sed -n -i 's/a/b/' f", "edit"),
        ("perl -pi -e 's/a/b/' file", "edit"),
        ("perl -i -pe 's/a/b/' file", "edit"),
        ("awk -i inplace '{print}' file", "edit"),
        ("gawk -i inplace '{print}' file", "edit"),
        ("echo hello > file.txt", "write"),
        ("printf 'x' >> notes.md", "write"),
        ("cat <<'EOF' > out.txt\nbody\nEOF", "write"),
        ("cat > out.txt <<EOF\nbody\nEOF", "write"),
        ("echo hi >| out.txt", "write"),
        ("echo hi &> out.txt", "write"),
        ("cat <<< 'x' > out.txt", "write"),
        ("npm test && cat package.json", "read"),
        ("A=1 B=2 rg foo", "grep"),
        ("<&3 grep x file", "grep"),
        ("cat <<EOF | grep x > f\nbody\nEOF\nless f", "read"),
        ("for f in *.py; do cat $f; done", "read"),
        ("if true; then find . -type f; fi", "find"),
        ("command sed -i s/a/b/ f", "edit"),
    ],
)
def test_default_rules(command: str, tool: str) -> None:
    assert blocked_tool(command) == tool


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat",
        "cat <<EOF\nhello\nEOF",
        "ls | grep foo",
        "ps aux | head -5",
        "find . -maxdepth 1",
        "sed 's/a/b/' file",
        "perl -e 'print 1'",
        "perl -I lib script.pl",
        "awk '{print $1}' file",
        "echo hello",
        "echo hi > /dev/null",
        "echo oops >&2",
        "make 2>&1",
        "git commit -m 'cat file'",
        "printf 'x\\n' |\n grep x",
        "printf 'x\\n' | # only x\n grep x",
        "echo '->' \"<p>\"",
        "echo hi > /dev/tty",
        "echo hi 2> err.log",
        "x=$(cat VERSION)",
        "diff <(cat a) b",
        "perl -Mstrict -e 1",
        "echo 'cat file' | sh -c 'read x'",
    ],
)
def test_commands_that_pass(command: str) -> None:
    assert blocked_tool(command) is None


def test_rules_whose_tool_is_missing_do_not_block() -> None:
    assert blocked_tool("cat README.md", tools=["grep"]) is None
    assert blocked_tool("grep x .", tools=["grep"]) == "grep"
    assert blocked_tool("grep x .", tools=[]) is None


def test_block_text_and_rule_name() -> None:
    block = intercept("rg foo", RULES, ALL_TOOLS)
    assert block is not None and block.rule == "grep"
    assert block.text("rg foo") == (
        f"Blocked: {messages.INTERCEPT_GREP}\n\nOriginal command: rg foo\n\n"
        'Structured recovery: {"tool":"grep","pattern":"foo"}'
    )
    assert block.message.startswith("Use the `grep` tool instead of")


def test_invalid_regex_is_skipped_and_reported_once() -> None:
    warnings: list[str] = []
    rules = compile_rules(
        [
            InterceptorRule(pattern="([unclosed", tool="read", message="m"),
            InterceptorRule(pattern="x", flags="q", tool="read", message="m"),
            InterceptorRule(pattern=r"^make\b", tool="build", message="Use build."),
        ],
        warn=warnings.append,
    )
    assert len(rules) == 1 and len(warnings) == 2
    assert "([unclosed" in warnings[0]
    block = intercept("npm test && make all", rules, ["build"])
    assert block is not None and block.rule == r"^make\b" and block.message == "Use build."
    assert block.recovery == Recovery(tool="build")


def test_custom_rule_flags_and_first_match_wins() -> None:
    rules = compile_rules(
        [
            InterceptorRule(pattern="^DOCKER", flags="i", tool="a", message="first", name="one"),
            InterceptorRule(pattern="docker", tool="b", message="second", name="two"),
        ],
        warn=lambda m: pytest.fail(m),
    )
    block = intercept("docker ps", rules, ["a", "b"])
    assert block is not None and block.rule == "one"
    block = intercept("docker ps", rules, ["b"])
    assert block is not None and block.rule == "two"


def test_configured_rules_judge_the_whole_command_and_each_simple_one() -> None:
    rules = compile_rules(
        [
            InterceptorRule(pattern=r"^git add file && git commit", tool="vcs", message="m"),
            InterceptorRule(pattern=r"^git\s+push\b", tool="vcs", message="m", name="push"),
        ],
        warn=lambda m: pytest.fail(m),
    )
    # Only the whole command matches the first rule: it spans two simple commands.
    block = intercept("git add file && git commit -m message", rules, ["vcs"])
    assert block is not None and block.rule == r"^git add file && git commit"
    assert block.recovery == Recovery(tool="vcs")
    # Only a simple command matches the second: the whole starts with `npm`.
    block = intercept("npm test && git push origin main", rules, ["vcs"])
    assert block is not None and block.rule == "push"
    assert intercept("git add other && git commit -m x", rules, ["vcs"]) is None
    assert intercept("echo 'git push'", rules, ["vcs"]) is None


@pytest.mark.parametrize(
    ("command", "cwd", "path"),
    [
        ("cat a.txt", None, "a.txt"),
        ("cat a.txt", "sub", "sub/a.txt"),
        ("cd pkg && cd lib && cat a.txt", None, "pkg/lib/a.txt"),
        ("cd pkg && cat ../a.txt", "sub", "sub/a.txt"),
        ("cd $HOME && cat a.txt", None, "a.txt"),
        ("cd pkg && cat /etc/hosts", None, "/etc/hosts"),
        ("(cd pkg) && cat a.txt", None, "a.txt"),
        ("cat a.txt", "~/x", "a.txt"),
    ],
)
def test_recovery_paths_follow_literal_cds(command: str, cwd: str | None, path: str) -> None:
    block = intercept(command, RULES, ALL_TOOLS, cwd=cwd)
    assert block is not None and block.recovery == Recovery(tool="read", path=path)
