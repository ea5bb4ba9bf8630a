"""Why params were refused, said for a person: the message of a -32602.

msgspec's text (``Expected `float | null`, got `str` - at `$.timeout` ``) stays
in the error's `data`, where programs read it; clients show only the message,
so it says the same field first, in words, with the value that was sent:
``timeout: expected a number or null, got "abc"``. Pure: text in, text out.
"""

from __future__ import annotations

import re

import msgspec

from bashrpc.protocol import messages

# A value quoted in a message is cut to this many characters.
MAX_QUOTED_CHARS = 60

_AT = re.compile(r"(?P<problem>.*?) - at (?P<where>`key` in `\$[^`]*`|`\$[^`]*`)", re.S)
_EXPECTED = re.compile(r"Expected `(?P<type>[^`]+)`(?P<rest>.*)", re.S)
_GOT = re.compile(r", got `(?P<got>[^`]+)`")
# How msgspec's texts, and ours in its style, that say what was wanted begin.
_EXPECTATION = "Expected "
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_STEP = re.compile(r"\.(?P<key>[^.\[]+)|\[(?P<index>[0-9]+)\]|(?P<any>\[\.\.\.\])")


def reason(detail: str, document: bytes | None = None) -> str:
    """`detail` (msgspec's text, or one in its style) as `field: problem`.

    `document` is the JSON the path in `detail` points into; the value found
    there is quoted. Text in no known shape is passed on as it is."""
    at = _AT.fullmatch(detail)
    problem, where = (at["problem"], at["where"]) if at else (detail, None)
    path = "" if where is None else where.rsplit("`$", 1)[1].rstrip("`")
    field = path.lstrip(".")
    if where is not None and where.startswith("`key`"):
        # A key of an object: the path names the object, so no value is quoted.
        field, document = messages.PARAM_KEY_OF.format(field=field), None
    for pattern, text in ((_MISSING, messages.PARAM_MISSING), (_UNKNOWN, messages.PARAM_UNKNOWN)):
        named = pattern.fullmatch(problem)
        if named is not None:
            inner = f"{field}.{named['field']}" if field else named["field"]
            return messages.PARAM_PROBLEM.format(field=inner, problem=text)
    value = _quoted(document, path)
    expected = _EXPECTED.fullmatch(problem)
    if expected is not None:
        return _in_place(field, _expectation(expected["type"], expected["rest"], value))
    if problem.startswith(_EXPECTATION) and _GOT.search(problem) is None and value is not None:
        problem = messages.PARAM_GOT.format(expected=problem, got=value)
    if problem[:1].isupper() and not problem[1:2].isupper():
        problem = problem[0].lower() + problem[1:]
    return _in_place(field, problem)


def _in_place(field: str, problem: str) -> str:
    return messages.PARAM_PROBLEM.format(field=field, problem=problem) if field else problem


def _expectation(types: str, rest: str, value: str | None) -> str:
    words = messages.PARAM_OR.join(
        messages.PARAM_TYPE_WORDS.get(name, f"`{name}`") for name in types.split(" | ")
    )
    got = _GOT.match(rest)
    if got is not None:
        constraint = rest[got.end() :]
        value = value or messages.PARAM_TYPE_WORDS.get(got["got"], f"`{got['got']}`")
    else:
        constraint = rest
    text = messages.PARAM_EXPECTED.format(expected=words + constraint)
    return text if value is None else messages.PARAM_GOT.format(expected=text, got=value)


def _quoted(document: bytes | None, path: str) -> str | None:
    """The JSON at `path` in `document`, cut short; None when it cannot be found."""
    if document is None:
        return None
    try:
        node: object = msgspec.json.decode(document)
    except msgspec.DecodeError:
        return None
    position = 0
    while position < len(path):
        step = _STEP.match(path, position)
        if step is None or step["any"] is not None:
            return None
        position = step.end()
        key, index = step["key"], step["index"]
        if key is not None and isinstance(node, dict) and key in node:
            node = node[key]
        elif index is not None and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return None
    text = msgspec.json.encode(node).decode()
    if len(text) > MAX_QUOTED_CHARS:
        text = text[: MAX_QUOTED_CHARS - 1] + "…"
    return text
