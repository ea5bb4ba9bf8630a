import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.envelope import Call, Rejected, parse_line
from bashrpc.protocol.errors import ErrorCode


def one(line: bytes) -> Call | Rejected:
    items, is_batch = parse_line(line)
    assert not is_batch and len(items) == 1
    return items[0]


def test_valid_request_keeps_raw_params() -> None:
    item = one(b'{"jsonrpc":"2.0","id":7,"method":"bash","params":{"command":"ls"}}')
    assert isinstance(item, Call)
    assert item.method == "bash" and item.id == 7 and not item.is_notification
    assert bytes(item.params) == b'{"command":"ls"}'


def test_notification_has_no_id() -> None:
    item = one(b'{"jsonrpc":"2.0","method":"exit"}')
    assert isinstance(item, Call) and item.is_notification and item.reply_id is None


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"{not json", ErrorCode.PARSE_ERROR),
        (b"\xff\xfe", ErrorCode.PARSE_ERROR),
        (b'"just a string"', ErrorCode.INVALID_REQUEST),
        (b"42", ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"1.0","id":1,"method":"x"}', ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":5}', ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1}', ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', ErrorCode.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":3}', ErrorCode.INVALID_REQUEST),
    ],
)
def test_rejections(line: bytes, code: ErrorCode) -> None:
    item = one(line)
    assert isinstance(item, Rejected)
    assert item.response.error.code == code


REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"bash","params":{"command":"echo %s"}}'


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        # Inside a string of the params, in an object key there or in the envelope,
        # in a batch, and as an encoded surrogate or an overlong form.
        (REQUEST.replace(b"%s", b"\xff"), b"\xff"),
        (REQUEST.replace(b'"command"', b'"comm\xe9and"'), b"\xe9"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x\xc3":1}', b"\xc3"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"k":"\x80"}}]', b"\x80"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xed\xa0\x80"}', b"\xed"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xc0\xaf"}', b"\xc0"),
    ],
)
def test_invalid_utf8_anywhere_is_a_parse_error(line: bytes, bad: bytes) -> None:
    items, _ = parse_line(line)
    assert len(items) == 1 and isinstance(items[0], Rejected)
    reply = items[0].response
    assert reply.id is None and reply.error.code == ErrorCode.PARSE_ERROR
    assert reply.error.data == messages.INVALID_UTF8.format(offset=line.index(bad))


def test_valid_utf8_is_data() -> None:
    item = one(REQUEST.replace(b"%s", "d\u00f6ne \u4e2d \U0001f600".encode()))
    assert isinstance(item, Call)
    assert bytes(item.params) == '{"command":"echo d\u00f6ne \u4e2d \U0001f600"}'.encode()


def test_invalid_request_echoes_a_usable_id() -> None:
    item = one(b'{"jsonrpc":"2.0","id":"abc","method":5}')
    assert isinstance(item, Rejected) and item.response.id == "abc"


def test_parse_error_has_null_id() -> None:
    item = one(b'{"id": 3, oops')
    assert isinstance(item, Rejected) and item.response.id is None


def test_batch_is_split_member_by_member() -> None:
    items, is_batch = parse_line(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"}, 5, {"jsonrpc":"2.0","method":"n"}]'
    )
    assert is_batch
    assert isinstance(items[0], Call) and items[0].id == 1
    assert isinstance(items[1], Rejected)
    assert items[1].response.error.code == ErrorCode.INVALID_REQUEST
    assert isinstance(items[2], Call) and items[2].is_notification


def test_empty_batch_is_one_invalid_request() -> None:
    items, is_batch = parse_line(b"[]")
    assert not is_batch
    assert isinstance(items[0], Rejected)
    assert items[0].response.error.data == messages.EMPTY_BATCH


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    item = one(b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(item, Rejected)
