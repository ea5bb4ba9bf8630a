"""`abort_bash` on a new connection reaches a command its client started on a cut one."""

from __future__ import annotations

from typing import Any

import pytest

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashAttachParams, BashParams, BashResult
from tests.daemon import DaemonProcess, introduce
from tests.rpc import marked_processes, wait_until

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
GONE_BOUND_SECONDS = 10.0


def start_detached(
    daemon: DaemonProcess, client_id: str, marker: str, id: int | None = None, **fields: Any
) -> RequestId:
    """A command that runs on after its connection is cut; its request id.
    `fields` are the request's other BashParams."""
    first = introduce(daemon.connect(), client_id)
    command = f"exec -a {marker} sleep 300"
    ident = first.request("bash", BashParams(command=command, **fields), id=id)
    assert wait_until(lambda: marked_processes(marker))
    first.cut()
    return ident


def test_an_abort_by_session_reaches_a_detached_command(daemon: DaemonProcess) -> None:
    marker = "detached-abort-session-mark"
    ident = start_detached(daemon, "by-session", marker, session_id="work")
    again = introduce(daemon.connect(), "by-session")
    assert again.abort(session_id="work")
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.cancelled
    again.close()


def test_an_abort_by_request_id_reaches_a_detached_command(daemon: DaemonProcess) -> None:
    marker = "detached-abort-request-mark"
    ident = start_detached(daemon, "by-request", marker)
    # Another client's connection, or one of no client, cannot reach it.
    stranger = introduce(daemon.connect(), "someone-else")
    anonymous = daemon.connect()
    assert not stranger.abort(request_id=ident)
    assert not anonymous.abort(request_id=ident)
    assert marked_processes(marker)
    again = introduce(daemon.connect(), "by-request")
    assert again.abort(request_id=ident)
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.cancelled
    assert not again.abort(request_id=ident)
    for client in (again, stranger, anonymous):
        client.close()


def test_the_connections_own_request_of_that_id_is_aborted_first(daemon: DaemonProcess) -> None:
    held, own = "detached-abort-held-mark", "detached-abort-own-mark"
    start_detached(daemon, "same-id", held, id=5)
    again = introduce(daemon.connect(), "same-id")
    # In a session of its own: the held one still holds the default session's turn.
    command = f"exec -a {own} sleep 300"
    mine = again.request("bash", BashParams(command=command, session_id="own"), id=5)
    assert wait_until(lambda: marked_processes(own))
    assert again.abort(request_id=5)
    assert again.bash_result(mine).cancelled
    assert marked_processes(held)
    # Its own is over: now the id names the detached one.
    assert again.abort(request_id=5)
    assert wait_until(lambda: not marked_processes(held), GONE_BOUND_SECONDS)
    assert again.typed(BashResult, "bash/attach", BashAttachParams(request_id=5)).cancelled
    again.close()


def test_an_abort_by_request_id_reaches_a_detached_pty(daemon: DaemonProcess) -> None:
    """A PTY request is kept as a record too, so its id reaches it after the cut."""
    marker = "detached-abort-pty-mark"
    ident = start_detached(daemon, "pty-by-request", marker, pty=True)
    again = introduce(daemon.connect(), "pty-by-request")
    assert again.abort(request_id=ident)
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    result = again.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident))
    assert result.cancelled
    again.close()
