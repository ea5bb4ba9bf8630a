"""What a command leaves for the server to read never stalls the event loop: every
session, and every request of the connection, shares it. Each case makes the
server read a command's own text of the size that used to cost seconds (its
DEBUG trap, carried by every status record and restored before every command;
a failed sandboxed command's output, read for the sandbox's denials), while a
`ping` is sent again and again until the command is answered."""

from __future__ import annotations

import time

from bashrpc.protocol.envelope import RequestId
from bashrpc.protocol.methods import BashParams
from tests.conftest import SpawnInProcess
from tests.e2e.test_sandbox import sandboxed
from tests.rpc import RpcClient
from tests.sandboxing import skip_without_sandbox

# A bound that only catches a stall: ten normal answers, but never under this.
STALL_FLOOR_SECONDS = 2.0
NORMAL_ANSWERS = 10
BASELINE_PINGS = 20
# A DEBUG trap whose record is near its 1 MiB bound, every command: letters, then
# quotes (each printed as four characters by `trap -p`).
TRAP_LETTERS, TRAP_QUOTES = 800_000, 40_000
TRAP_SHOWN_BYTES = len("trap -- ': ") + TRAP_LETTERS + 4 * TRAP_QUOTES + len("' DEBUG\n")
# A left single quotation mark opens a quote the denial scan looked for a close of,
# from every one of them to the end of the line.
OPENING_QUOTES = 60_000


def ping_seconds(server: RpcClient) -> float:
    started = time.monotonic()
    server.call("ping")
    return time.monotonic() - started


def stall_bound(server: RpcClient) -> float:
    normal = max(ping_seconds(server) for _ in range(BASELINE_PINGS))
    return max(STALL_FLOOR_SECONDS, NORMAL_ANSWERS * normal)


def worst_ping_until_answered(server: RpcClient, ident: RequestId) -> float:
    """The slowest of the pings sent while the request `ident` was unanswered."""
    worst = 0.0
    while not any(m.method is None and m.id == ident for m in server.messages):
        worst = max(worst, ping_seconds(server))
    return worst


def test_a_huge_trap_costs_the_other_requests_nothing(spawn: SpawnInProcess) -> None:
    server = spawn()
    bound = stall_bound(server)
    letters = f"$(head -c {TRAP_LETTERS} /dev/zero | tr '\\0' a)"
    quotes = f"$(head -c {TRAP_QUOTES} /dev/zero | tr '\\0' \"'\")"
    trap = f'trap ": {letters}{quotes}" DEBUG; true'
    set_trap = server.request("bash", BashParams(command=trap))
    assert worst_ping_until_answered(server, set_trap) < bound
    assert server.bash_result(set_trap).exit_code == 0
    # Each later command restores it first, and its record carries it again.
    for _ in range(2):
        ident = server.request("bash", BashParams(command="echo still"))
        assert worst_ping_until_answered(server, ident) < bound
        assert server.bash_result(ident).output == "still\n"
    assert server.bash("trap -p DEBUG | wc -c").output.strip() == str(TRAP_SHOWN_BYTES)


def test_a_denial_scan_of_hostile_output_costs_the_other_requests_nothing(
    spawn: SpawnInProcess,
) -> None:
    skip_without_sandbox()
    server = sandboxed(spawn, "read-only", "[output]\nmaxBytes = 262144\n")
    bound = stall_bound(server)
    command = f"printf '%{OPENING_QUOTES}s' '' | sed 's/ /‘/g'; exit 1"
    ident = server.request("bash", BashParams(command=command))
    assert worst_ping_until_answered(server, ident) < bound
    result = server.bash_result(ident)
    assert result.exit_code == 1 and result.output.count("‘") == OPENING_QUOTES
    # The scan still finds a refused write.
    refused = server.bash("touch /etc/bashrpc-denied")
    assert refused.exit_code != 0 and refused.sandbox_denied, refused
