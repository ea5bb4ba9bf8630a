"""Intercepting bash commands that a dedicated tool does better (pure).

Each rule judges one simple command of the parse (see `bashparse`), so
`npm test && git commit` is two commands and `'a -> b'` is one quoted word.
A configured rule also judges the whole command, as written for the input a
model sent (`^git add f && git commit` spans two simple commands).
This is guidance for models, not a security boundary: it only recognizes the
common spellings, and a determined command gets through. A rule blocks only
when the host's agent actually has the tool it suggests.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence

import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import InterceptorRule, Recovery
from bashrpc.server.services.tool import bashparse
from bashrpc.server.services.tool.bashparse import SimpleCommand

# Words that run the rest of the line as the command.
_WRAPPERS = frozenset({"sudo", "command", "nohup", "time", "exec"})
_SUDO_VALUED = frozenset({"-u", "-g", "-C", "-h", "-p", "-U", "-D", "-r", "-t"})
# Options whose value is the next word, for the commands rules read operands of.
_VALUED = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes", "-s", "--pid"}),
    "grep": frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "-g", "-t", "-T", "--glob", "--type"}),
    "sed": frozenset({"-e", "-f", "-l"}),
    "awk": frozenset({"-f", "-v", "-F", "-i"}),
}
_SED_VALUED_LETTERS = "efl"
_PERL_VALUED_LETTERS = "eEIMmlx0CdD"
_READERS = frozenset({"cat", "head", "tail", "less", "more"})
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ripgrep", "ag", "ack"})
_FINDERS = frozenset({"find", "fd", "fdfind", "locate"})
_SEDS = frozenset({"sed"})
_PERLS = frozenset({"perl"})
_AWKS = frozenset({"awk", "gawk"})
_WRITERS = frozenset({"echo", "printf", "cat"})
_FIND_FILTERS = frozenset(
    {"-name", "-iname", "-type", "-path", "-ipath", "-wholename", "-iwholename", "-regex"}
)
_FIND_PATTERNS = ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})
_NOT_FILES = frozenset({"/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr"})
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "a": re.ASCII}
_encode = msgspec.json.Encoder().encode


class Invocation(msgspec.Struct, frozen=True):
    """A simple command seen as the program it runs: past `sudo` and the like."""

    simple: SimpleCommand
    # The program's base name; "" when only wrappers were given.
    name: str
    args: list[str]


# A match: the recovery to suggest, or None when the rule doesn't apply.
Matcher = Callable[[Invocation], Recovery | None]


class Rule(msgspec.Struct, frozen=True):
    name: str
    tool: str
    message: str
    match: Matcher
    # The programs the rule can match, so others cost one lookup; None: any.
    programs: frozenset[str] | None = None
    # Whether the whole command matches, judged before its simple commands; None:
    # the rule judges simple commands only.
    whole: Callable[[str], bool] | None = None


class Block(msgspec.Struct, frozen=True):
    tool: str
    rule: str
    message: str
    recovery: Recovery

    def text(self, command: str) -> str:
        recovery = _encode(self.recovery).decode()
        return messages.BLOCKED.format(message=self.message, command=command, recovery=recovery)


def intercept(
    command: str, rules: Sequence[Rule], tool_names: Iterable[str], cwd: str | None = None
) -> Block | None:
    """The first rule that matches the whole command, else the first simple command a
    rule matches, among rules whose tool the host has.

    Paths in the recovery are relative to the workspace: the call's `cwd` and
    literal `cd`s before the command are folded in."""
    available = set(tool_names)
    active = [rule for rule in rules if rule.tool in available]
    if not active:
        return None
    for rule in active:
        if rule.whole is not None and rule.whole(command):
            return Block(rule.tool, rule.name, rule.message, Recovery(tool=rule.tool))
    for simple in bashparse.simple_commands(command):
        invocation = _invocation(simple)
        for rule in active:
            if rule.programs is not None and invocation.name not in rule.programs:
                continue
            hint = rule.match(invocation)
            if hint is not None:
                return Block(rule.tool, rule.name, rule.message, _rebase(hint, simple, cwd))
    return None


def _rebase(hint: Recovery, simple: SimpleCommand, cwd: str | None) -> Recovery:
    if hint.path is None or posixpath.isabs(hint.path):
        return hint
    parts = [p for p in (cwd, *simple.cds) if p]
    if not parts or any(p.startswith("~") for p in parts):
        return hint
    path = posixpath.normpath(posixpath.join(*parts, hint.path))
    return msgspec.structs.replace(hint, path=path)


def compile_rules(
    rules: Iterable[InterceptorRule], warn: Callable[[str], None]
) -> tuple[Rule, ...]:
    """Configured rules: each regex searches the whole command, then each simple
    command's text. A broken rule is reported through `warn` and skipped."""
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
        match = functools.partial(_search, regex, rule.tool)
        whole = functools.partial(_found, regex)
        out.append(Rule(rule.name or rule.pattern, rule.tool, rule.message, match, whole=whole))
    return tuple(out)


def _found(regex: re.Pattern[str], command: str) -> bool:
    return regex.search(command) is not None


def _search(regex: re.Pattern[str], tool: str, invocation: Invocation) -> Recovery | None:
    return Recovery(tool=tool) if regex.search(invocation.simple.text) else None


def _invocation(simple: SimpleCommand) -> Invocation:
    words = list(simple.words)
    while words and words[0] in _WRAPPERS:
        wrapper = words.pop(0)
        while wrapper == "sudo" and words and words[0].startswith("-"):
            option = words.pop(0)
            if option in _SUDO_VALUED and words:
                words.pop(0)
    if not words:
        return Invocation(simple, "", [])
    return Invocation(simple, posixpath.basename(words[0]), words[1:])


def _operands(args: list[str], valued: frozenset[str]) -> tuple[list[str], dict[str, str]]:
    """Arguments that are not options, and the values of the options that take one."""
    operands: list[str] = []
    values: dict[str, str] = {}
    words = iter(args)
    for word in words:
        if word in valued:
            values.setdefault(word, next(words, ""))
        elif word == "--":
            operands.extend(words)
        elif not word.startswith("-") or word == "-":
            operands.append(word)
    return operands, values


def _read(call: Invocation) -> Recovery | None:
    if call.simple.piped:
        return None
    operands, _ = _operands(call.args, _VALUED.get(call.name, frozenset()))
    files = [o for o in operands if o != "-"]
    return Recovery(tool="read", path=files[0]) if files else None


def _grep(call: Invocation) -> Recovery | None:
    if call.simple.piped:
        return None
    operands, values = _operands(call.args, _VALUED["grep"])
    if "-e" in values:
        operands.insert(0, values["-e"])
    pattern = operands[0] if operands else None
    path = operands[1] if len(operands) > 1 else None
    return Recovery(tool="grep", pattern=pattern, path=path)


def _find(call: Invocation) -> Recovery | None:
    name, args = call.name, call.args
    if call.simple.piped:
        return None
    if name == "find" and _FIND_FILTERS.intersection(args):
        start = next((a for a in args if not a.startswith(("-", "(", "!"))), None)
        pattern = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_PATTERNS), None)
        return Recovery(tool="find", pattern=pattern, path=start)
    if name in ("fd", "fdfind", "locate"):
        operands, _ = _operands(args, frozenset())
        if operands:
            path = operands[1] if len(operands) > 1 else None
            return Recovery(tool="find", pattern=operands[0], path=path)
    return None


def _edited(args: list[str], valued: frozenset[str], script_first: bool) -> Recovery:
    operands, values = _operands(args, valued)
    if script_first and not {"-e", "-f", "-E"}.intersection(values):
        operands = operands[1:]
    return Recovery(tool="edit", path=operands[-1] if operands else None)


def _sed_in_place(call: Invocation) -> Recovery | None:
    args = call.args
    if not any(a == "--in-place" or _in_place_flag(a, _SED_VALUED_LETTERS) for a in args):
        return None
    return _edited([a for a in args if not a.startswith("-i")], _VALUED["sed"], True)


def _perl_in_place(call: Invocation) -> Recovery | None:
    args = call.args
    if not any(_in_place_flag(a, _PERL_VALUED_LETTERS) for a in args):
        return None
    # Clusters like `-pe` end in the code's option, so options are dropped and the
    # code is the first operand.
    return _edited([a for a in args if not a.startswith("-")], frozenset(), True)


def _awk_in_place(call: Invocation) -> Recovery | None:
    args = call.args
    pairs = zip(args, [*args[1:], ""], strict=True)
    if not any(a == "-iinplace" or (a == "-i" and b == "inplace") for a, b in pairs):
        return None
    return _edited(args, _VALUED["awk"], True)


def _in_place_flag(word: str, with_value: str) -> bool:
    """Whether a cluster of short options (`-ni`, `-pi.bak`) holds `-i`; a letter in
    `with_value` takes the rest of the word as its value, so `-Mstrict` does not."""
    if not word.startswith("-") or word.startswith("--"):
        return False
    for letter in word[1:]:
        if letter == "i":
            return True
        if letter in with_value:
            return False
    return False


def _write(call: Invocation) -> Recovery | None:
    if call.name == "cat" and _operands(call.args, frozenset())[0]:
        return None
    for redirect in call.simple.redirects:
        if redirect.op in _WRITE_OPS and redirect.fd in (None, "1") and _is_file(redirect.target):
            return Recovery(tool="write", path=redirect.target)
    return None


def _is_file(target: str) -> bool:
    return bool(target) and target not in _NOT_FILES and not target.startswith("/dev/fd/")


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("read", "read", messages.INTERCEPT_READ, _read, _READERS),
    Rule("grep", "grep", messages.INTERCEPT_GREP, _grep, _GREPS),
    Rule("find", "find", messages.INTERCEPT_FIND, _find, _FINDERS),
    Rule("sed-in-place", "edit", messages.INTERCEPT_EDIT_SED, _sed_in_place, _SEDS),
    Rule(
        "perl-in-place", "edit", messages.INTERCEPT_EDIT_PERL, _perl_in_place, frozenset({"perl"})
    ),
    Rule("awk-in-place", "edit", messages.INTERCEPT_EDIT_AWK, _awk_in_place, _AWKS),
    Rule("write", "write", messages.INTERCEPT_WRITE, _write, _WRITERS),
)
