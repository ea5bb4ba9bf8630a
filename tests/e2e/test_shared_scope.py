"""A shared scope: connections of different owners that name it drive one set of sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from bashrpc.protocol.errors import ErrorCode
from bashrpc.protocol.mcp import ConnectionSettings, HostOptions, InitializeParams, SandboxOverrides
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import BashAttachParams, BashParams, BashResult
from tests.daemon import DaemonProcess, introduce
from tests.rpc import marked_processes, wait_until
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow

# Generous bounds, only to catch a hang.
GONE_BOUND_SECONDS = 10.0


def joining(
    client_id: str | None, scope: str | None, settings: ConnectionSettings | None = None
) -> InitializeParams:
    """An `initialize` that names the client and the scope it joins (None: neither)."""
    return initialize_params(HostOptions(client_id=client_id, scope=scope, settings=settings))


def test_owners_in_one_scope_drive_each_others_sessions(daemon: DaemonProcess) -> None:
    alice = introduce(daemon.connect(), "alice", "team")
    bob = introduce(daemon.connect(), "bob", "team")
    alice.bash("export SET_BY=alice; cd /tmp", session_id="a")
    bob.bash("export SET_BY=bob; cd /", session_id="b")
    for client in (alice, bob):
        listed = client.sessions()
        assert {name: s.owner for name, s in listed.items()} == {"a": "alice", "b": "bob"}
    # One shell per session, whoever drives it: its state is the opener's.
    assert bob.bash('echo "$SET_BY"; pwd; export SEEN=bob', session_id="a").output == (
        "alice\n/tmp\n"
    )
    assert alice.bash('echo "$SET_BY $SEEN"', session_id="a").output == "alice bob\n"
    assert alice.bash('echo "$SET_BY"; pwd', session_id="b").output == "bob\n/\n"
    # Outside the scope: a third owner, and each owner's own sessions.
    carol = introduce(daemon.connect(), "carol", None)
    assert carol.sessions() == {}
    alice_alone = introduce(daemon.connect(), "alice", None)
    assert alice_alone.sessions() == {}
    alice_alone.bash("true", session_id="mine")
    assert set(alice.sessions()) == {"a", "b"}
    other_scope = introduce(daemon.connect(), "alice", "elsewhere")
    assert other_scope.sessions() == {}
    for client in (alice, bob, carol, alice_alone, other_scope):
        client.close()


def test_the_scope_lives_on_after_a_connection_leaves(daemon: DaemonProcess) -> None:
    marker = "shared-scope-kept-mark"
    alice = introduce(daemon.connect(), "alice", "kept")
    bob = introduce(daemon.connect(), "bob", "kept")
    alice.bash(f"export KEPT=yes; exec -a {marker} sleep 300 &")
    assert wait_until(lambda: marked_processes(marker))
    alice.close()
    assert bob.bash('echo "$KEPT"').output == "yes\n"
    assert bob.sessions()["default"].owner == "alice"
    # The last one leaves: its grace keeps them for whoever names the scope next.
    bob.close()
    anonymous = introduce(daemon.connect(), None, "kept")
    assert anonymous.bash('echo "$KEPT"').output == "yes\n"
    assert marked_processes(marker)
    # `shutdown` from one of the scope leaves the sessions to the others.
    reply = anonymous.call("shutdown")
    assert reply.error is None and bytes(reply.result) == b"null"
    anonymous.close()
    again = introduce(daemon.connect(), "bob", "kept")
    assert again.bash('echo "$KEPT"').output == "yes\n"
    assert marked_processes(marker)
    again.close()


def test_past_the_grace_after_its_last_connection_a_scopes_sessions_end(
    tmp_path: Path,
) -> None:
    marker = "shared-scope-grace-mark"
    daemon = DaemonProcess("--detach-grace", "1", tmp=tmp_path).wait_listening()
    try:
        alice = introduce(daemon.connect(), "alice", "brief")
        bob = introduce(daemon.connect(), "bob", "brief")
        alice.bash(f"export KEPT=yes; exec -a {marker} sleep 300 &")
        assert wait_until(lambda: marked_processes(marker))
        alice.close()
        # Held by bob for longer than the grace.
        assert not wait_until(lambda: not marked_processes(marker), timeout=2)
        bob.close()
        assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
        again = introduce(daemon.connect(), "alice", "brief")
        assert again.sessions() == {}
        assert again.bash('echo "[$KEPT]"').output == "[]\n"
        again.close()
    finally:
        daemon.kill()


def test_a_scopes_detached_request_is_its_clients_to_resume(daemon: DaemonProcess) -> None:
    marker = "shared-scope-detached-mark"
    first = introduce(daemon.connect(), "alice", "resume")
    ident = first.request("bash", BashParams(command=f"exec -a {marker} sleep 300"), id=3)
    assert wait_until(lambda: marked_processes(marker))
    bob = introduce(daemon.connect(), "bob", "resume")
    bob_request = bob.request("bash", BashParams(command="sleep 300", session_id="b"), id=3)
    first.cut()
    # Ids are each client's: bob's 3 is his own request, never alice's.
    assert bob.abort(request_id=ident)
    assert bob.bash_result(bob_request).cancelled
    assert not bob.abort(request_id=ident)
    error = bob.error("bash/attach", BashAttachParams(request_id=ident))
    assert error.code == ErrorCode.INVALID_PARAMS
    assert marked_processes(marker)
    alice = introduce(daemon.connect(), "alice", "resume")
    assert [r.request_id for r in alice.sessions()["default"].requests or []] == [ident]
    assert alice.abort(request_id=ident)
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    assert alice.typed(BashResult, "bash/attach", BashAttachParams(request_id=ident)).cancelled
    for client in (alice, bob):
        client.close()


def test_a_session_abort_reaches_another_owners_command_in_the_scope(
    daemon: DaemonProcess,
) -> None:
    marker = "shared-scope-abort-mark"
    alice = introduce(daemon.connect(), "alice", "abort")
    running = alice.request("bash", BashParams(command=f"exec -a {marker} sleep 300"))
    assert wait_until(lambda: marked_processes(marker))
    bob = introduce(daemon.connect(), "bob", "abort")
    assert bob.abort(session_id="default")
    assert alice.bash_result(running).cancelled
    assert wait_until(lambda: not marked_processes(marker), GONE_BOUND_SECONDS)
    for client in (alice, bob):
        client.close()


@pytest.mark.parametrize(("second", "scope"), [("alice", None), ("bob", "sandboxes")])
def test_each_connections_sandbox_holds_on_the_sessions_it_shares(
    daemon: DaemonProcess, tmp_path: Path, second: str, scope: str | None
) -> None:
    skip_without_sandbox()
    loose = introduce(daemon.connect(), "alice", scope)
    ident = loose.request("bash", BashParams(command="echo started; sleep 30"))
    loose.wait_for(lambda m: m.method == "bash/chunk")
    strict = daemon.connect()
    read_only = joining(
        second, scope, ConnectionSettings(sandbox=SandboxOverrides(mode="read-only"))
    )
    # Not while a command of the other connection runs where it would tighten.
    assert strict.error("initialize", read_only).code == ErrorCode.INVALID_PARAMS
    assert loose.abort(session_id="default")
    assert loose.bash_result(ident).cancelled
    strict.result("initialize", read_only)
    assert loose.bash("echo x > f").sandbox_denied
    # A session the looser connection opens since is tightened for the stricter one's command.
    assert loose.bash("echo x > f && cat f", session_id="new").output == "x\n"
    result = strict.bash("echo y > g", session_id="new")
    assert result.sandbox_denied and result.shell_restarted
    assert not (tmp_path / "g").exists()
    for client in (loose, strict):
        client.close()
