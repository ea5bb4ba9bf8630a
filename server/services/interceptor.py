"""Intercepting bash commands that a dedicated tool does better (pure).

This is guidance for models, not a security boundary: it only recognizes the
common spellings, and a determined command gets through. A rule blocks only
when the host's agent actually has the tool it suggests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from protocol import messages
from protocol.mcp import InterceptorRule

# Where a simple command can start: the beginning, or after ;, &&, || or a
# newline. Not after a single pipe: `ls | grep x` filters output, fine.
_START = r"(?:^|[;\n]|&&|\|\|)\s*(?:sudo\s+)?"

DEFAULT_RULES: tuple[InterceptorRule, ...] = (
    InterceptorRule(
        name="read",
        pattern=_START + r"(?:cat|head|tail|less|more)\s+(?:-\S+\s+)*(?!<<)[^\s|;&<>-]",
        tool="read",
        message=messages.INTERCEPT_READ,
    ),
    InterceptorRule(
        name="grep",
        pattern=_START + r"(?:grep|egrep|fgrep|rg|ripgrep|ag|ack)\b",
        tool="grep",
        message=messages.INTERCEPT_GREP,
    ),
    InterceptorRule(
        name="find",
        pattern=(
            _START + r"(?:find\b[^|;&\n]*\s-(?:i?name|type|i?path|i?wholename|i?regex)\b"
            r"|fd\s+\S|fdfind\s+\S|locate\s+\S)"
        ),
        tool="find",
        message=messages.INTERCEPT_FIND,
    ),
    InterceptorRule(
        name="sed-in-place",
        pattern=r"\bsed\s+(?:[^|;&\n]*\s)?(?:-i|-[a-zA-Z]*i[a-zA-Z]*|--in-place)\b",
        tool="edit",
        message=messages.INTERCEPT_EDIT_SED,
    ),
    InterceptorRule(
        name="perl-in-place",
        pattern=r"\bperl\s+(?:[^|;&\n]*\s)?-[a-hj-zA-Z]*i",
        tool="edit",
        message=messages.INTERCEPT_EDIT_PERL,
    ),
    InterceptorRule(
        name="awk-in-place",
        pattern=r"\b[gm]?awk\s+(?:[^|;&\n]*\s)?-i\s*inplace\b",
        tool="edit",
        message=messages.INTERCEPT_EDIT_AWK,
    ),
    InterceptorRule(
        name="write",
        pattern=(
            _START + r"(?:"
            # echo/printf/cat-heredoc, then a redirection into a file...
            r"(?:echo|printf|cat\b[^|;&\n]*<<)"
            r"[^|;&\n]*?(?<![0-9&>])>>?\s*(?!&|/dev/(?:null|stdout|stderr)\b)[^\s&|;>]"
            # ...or `cat > file <<EOF`, the redirection first.
            r"|cat\s*>>?\s*(?!&|/dev/)[^\s&|;>][^|;&\n]*<<"
            r")"
        ),
        tool="write",
        message=messages.INTERCEPT_WRITE,
    ),
)

_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "a": re.ASCII}


@dataclass(frozen=True, slots=True)
class CompiledRule:
    regex: re.Pattern[str]
    tool: str
    message: str
    name: str


@dataclass(frozen=True, slots=True)
class Block:
    tool: str
    rule: str
    message: str

    def text(self, command: str) -> str:
        return messages.BLOCKED.format(message=self.message, command=command)


def compile_rules(
    rules: Iterable[InterceptorRule], warn: Callable[[str], None]
) -> tuple[CompiledRule, ...]:
    """Compile what compiles; each broken rule is reported through `warn` and skipped."""
    out = []
    for rule in rules:
        try:
            flags = 0
            for letter in rule.flags or "":
                flags |= _FLAGS[letter]
            regex = re.compile(rule.pattern, flags)
        except (re.error, KeyError) as exc:
            warn(messages.INTERCEPT_BAD_RULE.format(pattern=rule.pattern, reason=exc))
            continue
        out.append(CompiledRule(regex, rule.tool, rule.message, rule.name or rule.pattern))
    return tuple(out)


def intercept(
    command: str, rules: Sequence[CompiledRule], tool_names: Iterable[str]
) -> Block | None:
    """The first matching rule among those whose tool the host has; None lets it run."""
    available = set(tool_names)
    for rule in rules:
        if rule.tool in available and rule.regex.search(command):
            return Block(rule.tool, rule.name, rule.message)
    return None
