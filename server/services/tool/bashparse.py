"""The simple commands of a bash command line, from a real parse (pure).

Interception rules judge one simple command at a time: a regex over the whole
line cannot tell `cd pkg && cat f` from `git commit -m 'cat f'`, nor a
pipeline continued on the next line from a command starting there, nor `->`
in quotes from a redirection. tree-sitter-bash parses what bash would run,
recovers from errors, and costs well under a millisecond per kilobyte.

Commands inside `$(...)` and `<(...)` are not listed: their output feeds
another command, which is the shell doing its job.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    import tree_sitter

# Never walked: their commands feed another's arguments, or are not commands.
_SKIPPED = frozenset({"command_substitution", "process_substitution", "comment", "heredoc_body"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_HEREDOC_PARTS = frozenset({"heredoc_start", "heredoc_body", "heredoc_end"})


class Redirect(msgspec.Struct, frozen=True):
    # The operator as written (`>`, `>>`, `>|`, `&>`, `<&`, `<<`, `<<<`...).
    op: str
    # The destination's literal text; "" for a heredoc.
    target: str
    # An explicit file descriptor (`2>`), else None.
    fd: str | None = None


class SimpleCommand(msgspec.Struct, frozen=True):
    # The command name and its arguments, unquoted where the quoting is static.
    words: tuple[str, ...]
    redirects: tuple[Redirect, ...]
    # As spelled, from the command name on: assignments and leading redirections dropped.
    text: str
    # Not first in its pipeline: its input is another command's output.
    piped: bool = False
    # The directories a literal `cd` changed to earlier on the line, in order.
    cds: tuple[str, ...] = ()


@functools.cache
def _parser() -> tree_sitter.Parser:
    """Loaded once: building the language costs far more than a parse. Loaded
    at the first parse: a server that intercepts nothing never loads tree-sitter."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def simple_commands(command: str) -> list[SimpleCommand]:
    """Every simple command bash would run for `command`, in source order."""
    tree = _parser().parse(command.encode("utf-8", "surrogateescape"))
    out: list[SimpleCommand] = []
    _walk(tree.root_node, out, [], piped=False)
    return out


def _walk(node: tree_sitter.Node, out: list[SimpleCommand], cds: list[str], piped: bool) -> None:
    kind = node.type
    if kind in _SKIPPED:
        return
    if kind == "command":
        _add(node, (), out, cds, piped)
    elif kind == "redirected_statement":
        _redirected(node, out, cds, piped)
    elif kind == "pipeline":
        first = True
        for child in node.named_children:
            _walk(child, out, cds, piped=piped or not first)
            first = first and child.type == "comment"
    elif kind == "subshell":
        _walk_children(node, out, list(cds), piped)
    else:
        _walk_children(node, out, cds, piped)


def _walk_children(
    node: tree_sitter.Node, out: list[SimpleCommand], cds: list[str], piped: bool
) -> None:
    for child in node.named_children:
        _walk(child, out, cds, piped)


def _redirected(
    node: tree_sitter.Node, out: list[SimpleCommand], cds: list[str], piped: bool
) -> None:
    """The redirections belong to the body's last command, which is the one bash gives them
    (tree-sitter attaches `a && b > f` to the whole list)."""
    body = node.child_by_field_name("body")
    redirects = tuple(c for c in node.named_children if c.type in _REDIRECTS)
    if body is None:
        return
    if body.type == "command":
        _add(body, redirects, out, cds, piped)
        return
    start = len(out)
    _walk(body, out, cds, piped)
    if len(out) == start or not redirects:
        return
    last = out[-1]
    parts = _Parts()
    for redirect in redirects:
        parts.redirect(redirect)
    out[-1] = SimpleCommand(
        words=last.words + tuple(parts.words),
        redirects=last.redirects + tuple(parts.redirects),
        text=" ".join([last.text, *parts.spelled]),
        piped=last.piped,
        cds=last.cds,
    )
    parts.walk_trailing(out, cds)


class _Parts:
    """A simple command's pieces, collected from its node and its redirections."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.redirects: list[Redirect] = []
        self.spelled: list[str] = []
        # Statements on a heredoc's first line after its delimiter (`<<EOF | grep x`).
        self.trailing: list[tree_sitter.Node] = []

    def redirect(self, node: tree_sitter.Node) -> None:
        self.redirects.append(_redirect(node))
        if node.type == "file_redirect":
            self.words.extend(_stray_arguments(node))
        if self.words:
            self.spelled.append(_spelling(node))
        if node.type == "heredoc_redirect":
            for child in node.named_children:
                if child.type in _REDIRECTS:
                    self.redirect(child)
                elif child.type not in _HEREDOC_PARTS:
                    self.trailing.append(child)

    def walk_trailing(self, out: list[SimpleCommand], cds: list[str]) -> None:
        for statement in self.trailing:
            _walk(statement, out, cds, piped=statement.type == "pipeline")


def _add(
    node: tree_sitter.Node,
    outer: tuple[tree_sitter.Node, ...],
    out: list[SimpleCommand],
    cds: list[str],
    piped: bool,
) -> None:
    parts = _Parts()
    for child in (*node.named_children, *outer):
        kind = child.type
        if kind in _REDIRECTS:
            parts.redirect(child)
        elif kind == "command_name" or (parts.words and kind != "variable_assignment"):
            parts.words.append(literal(child))
            parts.spelled.append(_text(child))
    words = parts.words
    if words:
        text = " ".join(parts.spelled)
        out.append(SimpleCommand(tuple(words), tuple(parts.redirects), text, piped, tuple(cds)))
        if words[0] == "cd" and len(words) == 2 and _plain_dir(words[1]):
            cds.append(words[1])
    parts.walk_trailing(out, cds)


def _plain_dir(word: str) -> bool:
    """A `cd` target whose meaning doesn't depend on the environment."""
    return bool(word) and word[0] not in "-~" and "$" not in word and "`" not in word


def _redirect(node: tree_sitter.Node) -> Redirect:
    fd = None
    op = ""
    target = ""
    for child in node.children:
        if child.type == "file_descriptor":
            fd = _text(child)
        elif not child.is_named and not op:
            op = _text(child)
        elif child.is_named and not target and node.type != "heredoc_redirect":
            target = literal(child)
    return Redirect(op, target, fd)


def _stray_arguments(node: tree_sitter.Node) -> list[str]:
    """tree-sitter reads `> f b` as two destinations; bash reads `b` as an argument.
    Words after a parse error are not taken: in `cat <<EOF > f | grep x` the grammar
    fails at `|` and would hand `grep x` to `cat`."""
    words: list[str] = []
    destinations = 0
    for index, child in enumerate(node.children):
        if child.type == "ERROR":
            break
        if node.field_name_for_child(index) == "destination":
            destinations += 1
            if destinations > 1:
                words.append(literal(child))
    return words


def _spelling(node: tree_sitter.Node) -> str:
    if node.type == "heredoc_redirect":
        return "".join(_text(c) for c in node.children if c.type in ("<<", "<<-", "heredoc_start"))
    return _text(node)


def literal(node: tree_sitter.Node) -> str:
    """A word's value once bash removes quotes; expansions stay as written."""
    kind = node.type
    if kind == "command_name":
        return "".join(literal(c) for c in node.named_children)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        return _text(node).removeprefix("$")[1:-1]
    if kind == "concatenation":
        return "".join(literal(c) for c in node.named_children)
    if kind == "word":
        return _unescape(_text(node))
    return _text(node)


def _unescape(word: str) -> str:
    if "\\" not in word:
        return word
    out = []
    chars = iter(word)
    for char in chars:
        out.append(next(chars, "") if char == "\\" else char)
    return "".join(out)


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")
