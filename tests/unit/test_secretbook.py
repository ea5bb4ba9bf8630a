"""The secret book: which values of an environment are secrets, and a session's found once."""

from __future__ import annotations

from bashrpc.server.output.secretbook import SecretBook


def test_a_sessions_secrets_are_those_of_the_environment_it_has_now() -> None:
    book = SecretBook(patterns=False)
    first = {"API_TOKEN": "first-token-value", "PATH": "/usr/bin"}
    assert book.of_session("s1", first) == {"API_TOKEN": b"first-token-value"}
    assert book.of_session("s1", first) == book.from_env(first)
    # The same id, opened again with another environment (a session closed and made anew).
    again = {"API_TOKEN": "second-token-value", "DB_PASSWORD": "hunter2-hunter2"}
    assert book.of_session("s1", again) == {
        "API_TOKEN": b"second-token-value",
        "DB_PASSWORD": b"hunter2-hunter2",
    }
    book.forget_session("s1")
    assert book.of_session("s1", first) == {"API_TOKEN": b"first-token-value"}


def test_many_sessions_keep_their_own_secrets() -> None:
    book = SecretBook(patterns=False)
    envs = {f"s{n}": {"SERVICE_KEY": f"value-of-session-{n:03}"} for n in range(200)}
    for session_id, env in envs.items():
        book.of_session(session_id, env)
    for session_id, env in envs.items():
        assert book.of_session(session_id, env) == {"SERVICE_KEY": env["SERVICE_KEY"].encode()}
