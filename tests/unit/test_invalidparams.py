"""The message of a -32602: msgspec's text said for a person, field first, value quoted."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bashrpc.protocol import messages
from bashrpc.protocol.invalidparams import MAX_QUOTED_CHARS, reason
from bashrpc.protocol.methods import BashParams


def refusal(params: bytes, kind: type[msgspec.Struct] = BashParams) -> str:
    """msgspec's own text for params that do not decode."""
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(params, type=kind)
    return str(caught.value)


@pytest.mark.parametrize(
    ("params", "said"),
    [
        (b'{"command": "x", "timeout": "30"}', 'timeout: expected a number or null, got "30"'),
        (b'{"command": 5}', "command: expected a string, got 5"),
        (b"{}", "command: required field missing"),
        (b'{"command": "x", "colour": "blue"}', "colour: unknown field"),
        (
            b'{"command": "x", "pty": {"cols": true}}',
            "pty.cols: expected an integer or null, got true",
        ),
        (b'{"command": "x", "env": {"A": 1}}', "env[...]: expected a string, got an integer"),
        (b"[1, 2]", "expected an object, got [1,2]"),
    ],
)
def test_field_first_with_the_value_sent(params: bytes, said: str) -> None:
    assert reason(refusal(params), params) == said


def test_a_key_is_named_as_one_and_not_quoted() -> None:
    params = b'{"command": "x", "env": {"1X": "v"}}'
    said = reason(refusal(params), params)
    assert said.startswith(messages.PARAM_KEY_OF.format(field="env") + ": expected a string")
    assert "1X" not in said


def test_long_values_are_cut() -> None:
    params = b'{"command": "x", "timeout": "' + b"9" * 500 + b'x"}'
    said = reason(refusal(params), params)
    assert said.endswith("…") and len(said) < MAX_QUOTED_CHARS + 60


def test_our_own_expectations_quote_the_value_too() -> None:
    detail = messages.NOT_FINITE.format(field="timeout")
    assert reason(detail, b'{"timeout": "nan"}') == 'timeout: expected a finite number, got "nan"'


def test_without_the_document_the_type_is_named() -> None:
    assert reason("Expected `float`, got `str` - at `$.timeout`") == (
        "timeout: expected a number, got a string"
    )


@pytest.mark.parametrize(
    ("detail", "said"),
    [
        (
            messages.FIELD_HAS_NUL.format(field="command"),
            "command: expected a string without NUL characters",
        ),
        (messages.UNKNOWN_TOOL.format(name="python"), "unknown tool: python"),
        (
            "JSON is malformed: trailing characters (byte 5)",
            "JSON is malformed: trailing characters (byte 5)",
        ),
    ],
)
def test_texts_in_msgspec_style_or_none(detail: str, said: str) -> None:
    assert reason(detail) == said


@given(
    problem=st.sampled_from(["Expected `int`, got `str`", "Object missing required field `x`", ""]),
    where=st.text(max_size=30),
    detail=st.text(max_size=60),
    document=st.one_of(st.none(), st.binary(max_size=60), st.just(b'{"a": [1, {"b": "c"}]}')),
)
def test_any_text_and_document_give_a_reason(
    problem: str, where: str, detail: str, document: bytes | None
) -> None:
    """An error path must not fail itself: whatever the text and params, a reason."""
    for text in (f"{problem} - at `${where}`", f"{problem} - at `key` in `${where}`", detail):
        assert isinstance(reason(text, document), str)
