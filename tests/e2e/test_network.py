"""The sandbox's network allowlist with real bwrap and real clients, as root and
as uid 65534, in workspace-write and read-only: what goes out through the
session's proxy, and each way around it that must not."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import InitializeResult, ToolsListResult
from bashrpc.protocol.mcpclient import initialize_params
from bashrpc.protocol.methods import (
    BashParams,
    BashResult,
    NetworkConnection,
    NetworkRequest,
    ServerStatsResult,
    SessionCloseParams,
    SessionListResult,
    SessionOpenParams,
)
from bashrpc.protocol.terminals import (
    TerminalCreateParams,
    TerminalCreateResult,
    TerminalOutputParams,
    TerminalOutputResult,
    TerminalParams,
    TerminalWaitResult,
)
from bashrpc.server.runtime.network import rules
from bashrpc.server.runtime.network.gateway import RECENT
from bashrpc.server.runtime.seam.egress import DEFAULT_MAX_CONNECTIONS
from tests.e2e.test_tools import call_tool, structured, text_of
from tests.githost import USERS, Host
from tests.inprocess import InProcessServer
from tests.networld import HELLO, PACKAGE, World, netserve_env, network_settings
from tests.rpc import ServerProcess, ok_result, wait_until
from tests.sandboxing import skip_without_sandbox

pytestmark = pytest.mark.slow

MODES = ("workspace-write", "read-only")
COMMAND_SECONDS = 120.0
PY = sys.executable


class Net:
    """One server as one user in one mode, with the world it reaches."""

    def __init__(self, host: Host, world: World, server: ServerProcess, mode: str) -> None:
        self.host, self.world, self.server, self.mode = host, world, server, mode
        # A Python with pip that the user can run (the suite's may be root's alone).
        self.python = PY if host.user == "root" else "/usr/bin/python3"
        ca = str(self.host.base / "project" / "ca.pem")
        self.env = {
            "CURL_CA_BUNDLE": ca,
            "GIT_SSL_CAINFO": ca,
            "PIP_CERT": ca,
            "REQUESTS_CA_BUNDLE": ca,
            "NODE_EXTRA_CA_CERTS": ca,
            "SSL_CERT_FILE": ca,
            "CA": ca,
        }

    def output(self, command: str, session: str = "main") -> str:
        """The command's output without the allowlist's notice to the model (and
        the line end put before it)."""
        return self.run(command, session).output.split("\n[The sandbox's network")[0]

    def run(self, command: str, session: str = "main") -> BashResult:
        params = BashParams(command=command, session_id=session, env=self.env, timeout=100)
        reply = self.server.call("bash", params, timeout=COMMAND_SECONDS)
        return ok_result(reply, BashResult)

    def refused(self, session: str = "main") -> list[NetworkConnection]:
        """The session's refused connections, in order. A refusal is listed before
        its client hears of it; a connection let through is listed when it ends,
        which may be in the middle of a later command."""
        return [c for c in self.connections(session) if not c.allowed]

    def connections(self, session: str = "main") -> list[NetworkConnection]:
        reply = self.server.call("session/list", timeout=COMMAND_SECONDS)
        listed = ok_result(reply, SessionListResult)
        (found,) = [s for s in listed.sessions if s.session_id == session]
        return found.connections or []


def serve(host: Host, world: World, mode: str, extra: str = "") -> ServerProcess:
    return host.serve(
        host.base / "project",
        mode,
        network_settings(extra),
        env=netserve_env(),
        interpreter=(PY, "-m", "tests.netserve", str(world.mapping)),
    )


@pytest.fixture(scope="module", params=[(u, m) for u in USERS for m in MODES], ids=str)
def net(request: pytest.FixtureRequest) -> Iterator[Net]:
    skip_without_sandbox()
    user, mode = request.param
    if user == "nobody" and os.geteuid() != 0:
        pytest.skip("only root can run the host as uid 65534")
    base = Path(tempfile.mkdtemp(prefix="bashrpc-net-"))
    base.chmod(0o755)
    host = Host(user, base)
    world = World(base / "world")
    workspace = base / "project"
    workspace.mkdir()
    host.write(workspace / "ca.pem", world.ca.read_text())
    host.write(workspace / ".keep", "")
    try:
        made = Net(host, world, serve(host, world, mode), mode)
        # The server's first sandbox (its probe), before any case's request.
        assert made.run("true").exit_code == 0
        yield made
    finally:
        host.stop()
        world.stop()
        shutil.rmtree(base, ignore_errors=True)


# -- real clients ---------------------------------------------------------------


def test_curl_plain_and_tls(net: Net) -> None:
    done = net.run(
        "curl -sS http://plain.example.org/hello.txt && curl -sS https://files.example.org/hello.txt"
    )
    assert (done.exit_code, done.output) == (0, HELLO + HELLO)


def test_wget_plain_and_tls(net: Net) -> None:
    done = net.run(
        "wget -q -O- http://plain.example.org/hello.txt"
        ' && wget -q --ca-certificate="$CA" -O- https://files.example.org/hello.txt'
    )
    assert (done.exit_code, done.output) == (0, HELLO + HELLO)


def test_git_clone_over_https(net: Net) -> None:
    done = net.run(
        "git clone -q https://git.example.org/repo.git /tmp/repo && cat /tmp/repo/README"
    )
    assert (done.exit_code, done.output) == (0, "cloned through the proxy\n")


def test_pip_download(net: Net) -> None:
    done = net.run(
        f"{net.python} -m pip download -q --no-cache-dir --no-deps -d /tmp/dl"
        f" --index-url https://pypi.example.org/simple {PACKAGE} && ls /tmp/dl"
    )
    assert (done.exit_code, done.output) == (0, f"{PACKAGE}-1.0-py3-none-any.whl\n"), done.output


def test_npm_pack(net: Net) -> None:
    done = net.run(
        'mkdir /tmp/pack && npm pack -s --cafile "$CA" --cache /tmp/npm'
        f" --pack-destination /tmp/pack --registry https://npm.example.org/ {PACKAGE}"
        " >/dev/null && ls /tmp/pack"
    )
    assert (done.exit_code, done.output) == (0, f"{PACKAGE}-1.0.0.tgz\n"), done.output


# -- the policy, as the host sees it --------------------------------------------


def test_initialize_and_session_list_name_the_policy(net: Net) -> None:
    started = net.server.typed(InitializeResult, "initialize", initialize_params())
    assert started.network is not None and started.network.mode == "allowlist"
    assert "*.cdn.example.org" in (started.network.allow or [])
    net.run("curl -s -o /dev/null http://plain.example.org/hello.txt")
    listed = net.server.typed(SessionListResult, "session/list")
    (main,) = [s for s in listed.sessions if s.session_id == "main"]
    assert main.network is not None and main.network.mode == "allowlist"
    assert main.network.deny == ["blocked.cdn.example.org"]
    # A connection of an earlier case on this server (a client's keep-alive) may
    # end, and so be listed, after this one: this case's host is looked for.
    ours = [c for c in main.connections or [] if c.host == "plain.example.org"]
    last = ours[-1]
    assert (last.host, last.port, last.allowed, last.protocol) == (
        "plain.example.org",
        80,
        True,
        "http",
    )
    assert last.bytes_received > len(HELLO)


HOLD_OPEN = """
import os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
client = socket.create_connection((proxy.hostname, proxy.port))
head = "GET http://plain.example.org/hello.txt HTTP/1.1\\r\\nHost: plain.example.org\\r\\n"
client.sendall(head.encode() + b"\\r\\n")
got = b""
while sys.argv[2].encode() not in got:
    got += client.recv(65536)
open(sys.argv[1], "w").close()
time.sleep(600)
"""


def _listed(net: Net) -> list[NetworkConnection]:
    return [c for c in net.connections() if c.host == "plain.example.org"]


def test_a_connection_still_open_is_listed_with_what_it_moved(net: Net) -> None:
    """A command can have its answer before its connection ends (a keep-alive, a
    process left running): the connection is listed from when it goes out."""
    held = f"/tmp/held-{os.urandom(4).hex()}"
    # An earlier case's connection may not have ended yet: ours is the new one.
    earlier = {c.started for c in _listed(net)}
    started = net.run(
        f"{net.python} - {held} {HELLO.split()[0]!r} >/dev/null 2>&1 <<'EOF' &\n{HOLD_OPEN}\nEOF\n"
        f"echo $! > {held}.pid; while [ ! -e {held} ]; do sleep 0.05; done; echo held"
    )
    assert (started.exit_code, started.output) == (0, "held\n")
    (going,) = [c for c in _listed(net) if c.open and c.started not in earlier]
    assert (going.allowed, going.protocol, going.port) == (True, "http", 80)
    assert going.bytes_received > len(HELLO)
    assert net.run(f"kill $(cat {held}.pid) && wait").exit_code == 0
    deadline = time.monotonic() + COMMAND_SECONDS
    while [c for c in _listed(net) if c.open and c.started == going.started]:
        assert time.monotonic() < deadline, "the connection was never listed as ended"
        time.sleep(0.05)
    ended = [c for c in _listed(net) if c.started == going.started]
    assert [(c.open, c.bytes_received) for c in ended] == [(False, going.bytes_received)]


# -- each way around it ---------------------------------------------------------


def _python(net: Net, script: str) -> str:
    """What a Python script run in the sandbox prints."""
    done = net.run(f"{net.python} - <<'EOF'\n{script}\nEOF")
    return done.output


def test_direct_tcp_to_an_address_goes_nowhere(net: Net) -> None:
    done = net.run(
        "curl --noproxy '*' -sS -m 5 http://93.184.216.34/ 2>&1; echo curl=$?;"
        " (exec 3<>/dev/tcp/1.1.1.1/443) 2>&1; echo tcp=$?;"
        f" (exec 3<>/dev/tcp/127.0.0.1/{net.world.http_port}) 2>&1; echo host=$?"
    )
    assert "curl=7" in done.output and "tcp=1" in done.output and "host=1" in done.output
    assert "Network is unreachable" in done.output
    # The host's own loopback is another namespace's.
    assert "Connection refused" in done.output


SOCKET_ESCAPES = """
import errno, socket
def attempt(name, make, address=None, send=False):
    try:
        s = make()
        if send:
            s.sendto(b"x", address)
        elif address:
            s.settimeout(5)
            s.connect(address)
        print(name, "OPEN")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
udp = lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("udp-dns", udp, ("8.8.8.8", 53), True)
attempt("udp-quic", udp, ("93.184.216.34", 443), True)
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("ipv6", lambda: socket.socket(socket.AF_INET6), ("2606:4700:4700::1111", 443))
udp6 = lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
attempt("ipv6-udp", udp6, ("2001:4860:4860::8888", 53), True)
attempt("unix", lambda: socket.socket(socket.AF_UNIX))
"""


def test_udp_raw_packet_ipv6_and_unix_sockets_go_nowhere(net: Net) -> None:
    seen = dict(line.split() for line in _python(net, SOCKET_ESCAPES).splitlines())
    assert seen == {
        "udp-dns": "ENETUNREACH",
        "udp-quic": "ENETUNREACH",
        "raw": "EPERM",
        "packet": "EPERM",
        "ipv6": "ENETUNREACH",
        "ipv6-udp": "ENETUNREACH",
        # The socket filter holds for commands, with the proxy there.
        "unix": "EPERM",
    }


def test_a_port_not_allowed_is_refused_and_the_model_told(net: Net) -> None:
    done = net.run(
        "curl -sS https://files.example.org:8443/hello.txt 2>&1;"
        " curl -sS https://files.example.org:8443/again 2>&1; true"
    )
    assert "403" in done.output
    assert done.sandbox_denied
    notice = messages.NETWORK_DENIED.format(hosts="files.example.org:8443")
    assert done.output.count(notice) == 1
    assert net.refused()[-1].reason == "port"


SNI_MISMATCH = """
import socket, ssl
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT files.example.org:443 HTTP/1.1\\r\\nHost: files.example.org:443\\r\\n\\r\\n")
print(s.recv(100).split(b"\\r\\n")[0].decode())
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
try:
    context.wrap_socket(s, server_hostname="evil.example.net").do_handshake()
    print("handshake done")
except (OSError, ssl.SSLError) as e:
    print("handshake failed")
"""


def test_a_client_hello_naming_another_host_is_cut(net: Net) -> None:
    assert _python(net, SNI_MISMATCH) == "HTTP/1.1 200 Connection established\nhandshake failed\n"
    last = net.refused()[-1]
    assert (last.host, last.allowed, last.reason) == ("files.example.org", False, "sni")


def test_host_smuggling_is_refused(net: Net) -> None:
    done = net.run(
        "exec 3<>/dev/tcp/127.0.0.1/3128;"
        " printf 'GET http://plain.example.org/echo HTTP/1.1\\r\\n' >&3;"
        " printf 'Host: evil.example.net\\r\\n\\r\\n' >&3;"
        " head -c 300 <&3"
    )
    assert done.output.startswith("HTTP/1.1 403 Forbidden\n")
    assert "X-Proxy-Error: smuggled" in done.output
    assert "host=" not in done.output
    assert "plain.example.org:80: the request's Host header names another host" in done.output
    assert not done.sandbox_denied


def test_allowed_names_resolving_to_the_hosts_own_addresses_are_refused(net: Net) -> None:
    done = net.output(
        "for h in local intranet meta; do"
        " curl -s -o /dev/null -w '%{http_code} ' http://$h.example.org/hello.txt; done"
    )
    assert done == "403 403 403 "
    refused = net.refused()[-3:]
    assert [c.reason for c in refused] == ["address"] * 3


def test_a_wildcards_edges(net: Net) -> None:
    done = net.output(
        "for h in a.cdn.example.org cdn.example.org evilcdn.example.org"
        " a.cdn.example.org.evil.net blocked.cdn.example.org; do"
        ' curl -s -o /dev/null -w "$h=%{http_code} " http://$h/echo; done'
    )
    assert done.split() == [
        "a.cdn.example.org=200",
        "cdn.example.org=403",
        "evilcdn.example.org=403",
        "a.cdn.example.org.evil.net=403",
        "blocked.cdn.example.org=403",
    ]


def test_without_the_proxy_variables_there_is_no_network(net: Net) -> None:
    done = net.run("env -i PATH=$PATH curl -sS -m 10 http://plain.example.org/hello.txt 2>&1")
    assert done.exit_code == 6 and "Could not resolve host" in done.output


def test_garbage_gets_a_400(net: Net) -> None:
    done = net.run(
        "exec 3<>/dev/tcp/127.0.0.1/3128; printf '\\x00\\xff nonsense\\r\\n\\r\\n' >&3;"
        " head -c 12 <&3"
    )
    assert done.output == "HTTP/1.1 400"


def test_a_second_session_reaches_only_its_own_policy(net: Net) -> None:
    opened = SessionOpenParams(
        session_id="narrow", network=NetworkRequest(mode="allowlist", allow=["plain.example.org"])
    )
    assert net.server.call("session/open", opened).error is None
    fetch = "curl -s -o /dev/null -w '%{http_connect} ' https://files.example.org/hello.txt"
    assert net.output(fetch, session="narrow") == "403 "
    assert net.output(fetch) == "200 "
    assert net.output(fetch, session="narrow") == "403 "
    assert [c.reason for c in net.connections("narrow")] == ["not-allowed"] * 2
    wider = SessionOpenParams(
        session_id="wider", network=NetworkRequest(mode="allowlist", allow=["evil.example.net"])
    )
    refused = net.server.call("session/open", wider)
    assert refused.error is not None and "evil.example.net" in refused.error.message
    again = net.server.call("session/open", opened)
    assert again.error is not None
    assert again.error.message.endswith(messages.NETWORK_SESSION_EXISTS.format(session="narrow"))


FLOOD = """
import socket, time
held = []
for _ in range(1000):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", 3128))
    except BlockingIOError:
        pass
    held.append(s)
time.sleep(2)
sent = 0
for s in held:
    try:
        s.send(b"CONNECT plain.example.org:80 HTTP/1.1\\r\\n\\r\\n")
        sent += 1
    except OSError:
        pass
print("flooding", flush=True)
time.sleep(8)
"""


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_thousand_connections_at_once(net: Net) -> None:
    """One session floods its proxy: memory stays bounded, `ping` is answered
    meanwhile, and another session's commands still reach their hosts."""
    before = _rss_kib(net.server.proc.pid)
    params = BashParams(
        command=f"{net.python} - <<'EOF'\n{FLOOD}\nEOF",
        session_id="flood",
        timeout=100,
    )
    flood = net.server.request("bash", params)
    time.sleep(4)
    for _ in range(3):
        began = time.monotonic()
        assert net.server.call("ping", timeout=COMMAND_SECONDS).error is None
        assert time.monotonic() - began < 2.0
    fetch = "curl -sS -m 20 http://plain.example.org/hello.txt"
    assert net.output(fetch, session="bystander") == HELLO
    assert _rss_kib(net.server.proc.pid) - before < 64 * 1024
    done = ok_result(net.server.response(flood, timeout=COMMAND_SECONDS), BashResult)
    assert done.output == "flooding\n"

    # Its connections end as its client exits, so around its answer.
    assert wait_until(
        lambda: any(not c.open for c in net.connections("flood")), timeout=COMMAND_SECONDS
    )
    # Only the last 100 that ended are kept, and at most the limit are open at once
    # (a connection the kernel held for the proxy may still go out after its
    # client is gone: it is listed open until it ends).
    connections = net.connections("flood")
    ended = [c for c in connections if not c.open]
    assert 0 < len(ended) <= RECENT
    assert len(connections) - len(ended) <= DEFAULT_MAX_CONNECTIONS


SLOWLORIS = """
import socket, time
slow = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(20)]
for s in slow:
    s.sendall(b"GET http://plain.example.org/hello.txt HTTP/1.1\\r\\n")
    s.settimeout(0.05)
began = time.monotonic()
closed = {}
fetched = False
while len(closed) < len(slow) and time.monotonic() - began < 60:
    for i, s in enumerate(slow):
        if i in closed:
            continue
        try:
            s.sendall(b"X")
            if s.recv(1) == b"":
                closed[i] = time.monotonic() - began
        except socket.timeout:
            pass
        except OSError:
            closed[i] = time.monotonic() - began
    if not fetched and time.monotonic() - began > 2:
        quick = socket.create_connection(("127.0.0.1", 3128))
        quick.sendall(b"GET http://plain.example.org/hello.txt HTTP/1.1\\r\\n\\r\\n")
        print(quick.recv(12).decode(), flush=True)
        fetched = True
    time.sleep(0.5)
print(len(closed), "closed", "by", round(max(closed.values())))
"""


def test_a_slowloris_is_cut_and_others_served(net: Net) -> None:
    out = _python(net, SLOWLORIS).split("\n")
    assert out[0].startswith("HTTP/1.") and out[0].endswith(" 200")
    count, _, _, seconds = out[1].split()
    assert count == "20"
    # The head must come whole within the proxy's bound (10 s), however it trickles.
    assert 9 <= int(seconds) <= 30


def test_the_models_tool_names_each_refused_host_once(net: Net) -> None:
    """The bash tool's text ends in the notice, each refused host once, and its
    structured result says the sandbox refused; a tool call cannot name a network."""
    command = (
        "curl -s -o /dev/null https://evil.example.net/a; curl -s -o /dev/null https://evil.example.net/b;"
        " curl -s -o /dev/null http://meta.example.org/; curl -s http://plain.example.org/hello.txt"
    )
    result = call_tool(net.server, command, wait=COMMAND_SECONDS)
    text = text_of(result)
    hosts = "evil.example.net:443, meta.example.org:80"
    assert text.count(messages.NETWORK_DENIED.format(hosts=hosts)) == 1
    assert HELLO in text
    assert structured(result).sandbox_denied
    tools = net.server.typed(ToolsListResult, "tools/list").tools
    (bash,) = [t for t in tools if t.name == "bash"]
    assert "command" in bash.input_schema["properties"]
    assert not any("network" in name.lower() for name in bash.input_schema["properties"])


INDEX_NAMES = ("pypi.org", "files.pythonhosted.org")


def test_a_real_index_through_the_allowlist(tmp_path: Path) -> None:
    """A small real package from the real Python package index, when this machine
    reaches it (the host's resolver, no mapping)."""
    skip_without_sandbox()
    for name in INDEX_NAMES:
        try:
            found = {str(info[4][0]) for info in socket.getaddrinfo(name, 443)}
            socket.create_connection((name, 443), timeout=5).close()
        except OSError as exc:
            pytest.skip(f"this machine does not reach {name} ({exc})")
        local = sorted(a for a in found if rules.special(ipaddress.ip_address(a)))
        if local:
            # As a machine behind an intercepting gateway sees it: the proxy refuses those.
            pytest.skip(f"{name} resolves to {', '.join(local)} here, not a global address")
    settings_text = (
        '[sandbox]\nmode = "read-only"\n[sandbox.network]\nmode = "allowlist"\n'
        f"allow = {list(INDEX_NAMES)!r}\n".replace("'", '"')
    )
    server = InProcessServer(tmp=tmp_path, settings=settings_text)
    try:
        done = server.bash(
            "python3 -m pip download --isolated -q --no-cache-dir --no-deps -d /tmp/dl"
            " --index-url https://pypi.org/simple six==1.16.0"
            " && ls /tmp/dl; curl -s -o /dev/null -w '%{http_connect}' https://example.com/",
            timeout=100,
            wait=COMMAND_SECONDS,
        )
    finally:
        server.stop()
    assert done.output.startswith("six-1.16.0-py2.py3-none-any.whl\n403"), done.output


HANG_UPS = """
import socket
import subprocess
for _ in range(50):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"GET http://plain.example.org/hello.txt HTTP/1.1\\r\\n")
    s.sendall(b"Host: plain.example.org\\r\\n\\r\\n")
    s.close()
print("hung up")
"""


def test_clients_that_hang_up_early_leave_the_proxy_serving(net: Net) -> None:
    """A client gone before the host's answer ends: its tunnel ends alone (it
    once took the server down, half-closing a socket already closed)."""
    assert _python(net, HANG_UPS) == "hung up\n"
    time.sleep(1)
    assert net.output("curl -sS -m 20 http://plain.example.org/hello.txt") == HELLO
    assert net.server.call("ping", timeout=COMMAND_SECONDS).error is None


def test_closing_a_session_closes_its_connections(net: Net) -> None:
    opened = SessionOpenParams(session_id="closing")
    assert net.server.call("session/open", opened).error is None
    slow = net.world.slow
    before = len(slow.started), len(slow.ended)
    net.run("curl -sN http://plain.example.org/slow >/dev/null 2>&1 &", session="closing")
    deadline = time.monotonic() + 30
    while len(slow.started) == before[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(slow.started) == before[0] + 1
    closed = net.server.call("session/close", SessionCloseParams(session_id="closing"))
    assert closed.error is None
    while len(slow.ended) == before[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(slow.ended) == before[1] + 1


def test_the_flags_set_the_network(tmp_path: Path) -> None:
    server = ServerProcess(
        "--sandbox",
        "read-only",
        "--network",
        "allowlist",
        "--network-allow",
        "pypi.org",
        "--network-allow",
        "*.pythonhosted.org",
        tmp=tmp_path,
    )
    try:
        started = server.typed(InitializeResult, "initialize", initialize_params())
    finally:
        server.close()
    assert started.network is not None
    assert (started.network.mode, started.network.allow) == (
        "allowlist",
        ["pypi.org", "*.pythonhosted.org"],
    )
    assert started.network.ports == [80, 443]


def test_a_bad_flag_entry_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [PY, "-m", "bashrpc", "--network-allow", "*.com"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "'*.com': a wildcard needs a domain of two labels or more" in done.stderr


def test_a_pty_command_and_a_one_shot_have_their_own_way_out(net: Net) -> None:
    """Each sandbox a session starts (a PTY's, a one-shot's) hands its own listener
    to the session's proxy."""
    fetch = "curl -sS -m 20 http://plain.example.org/hello.txt"
    base = BashParams(command=fetch, session_id="main", env=net.env, timeout=100)
    before = net.server.typed(ServerStatsResult, "server/stats")
    for params in (
        msgspec.structs.replace(base, pty=True),
        msgspec.structs.replace(base, one_shot=True),
    ):
        done = ok_result(net.server.call("bash", params, timeout=COMMAND_SECONDS), BashResult)
        assert done.output.replace("\r\n", "\n").strip() == HELLO.strip(), params

    def counted() -> bool:
        """A connection is counted as it ends, which may be after its command's answer."""
        now = net.server.typed(ServerStatsResult, "server/stats")
        allowed = now.network_connections.allowed - before.network_connections.allowed
        received = now.network_bytes.received - before.network_bytes.received
        return allowed >= 2 and received > 2 * len(HELLO)

    assert wait_until(counted, timeout=COMMAND_SECONDS)


def test_a_background_job_has_its_own_way_out(net: Net) -> None:
    created = net.server.typed(
        TerminalCreateResult,
        "terminal/create",
        TerminalCreateParams(
            session_id="main",
            command="curl",
            args=["-sS", "-m", "20", "http://plain.example.org/hello.txt"],
        ),
    )
    ids = TerminalParams(session_id="main", terminal_id=created.terminal_id)
    exited = net.server.typed(
        TerminalWaitResult, "terminal/wait_for_exit", ids, timeout=COMMAND_SECONDS
    )
    assert exited.exit_code == 0
    output = net.server.typed(
        TerminalOutputResult,
        "terminal/output",
        TerminalOutputParams(session_id="main", terminal_id=created.terminal_id),
    )
    assert output.output == HELLO


def test_an_ip_literal_is_refused_unless_listed(net: Net) -> None:
    done = net.output(
        "curl -s -o /dev/null -w '%{http_code} ' http://93.184.216.34/hello.txt;"
        " curl -s -o /dev/null -w '%{http_connect} ' https://93.184.216.34/;"
        " curl -s -o /dev/null -w '%{http_connect}' 'https://[2606:2800:220:1::1]/'"
    )
    assert done == "403 403 403"
    assert [c.reason for c in net.refused()[-3:]] == ["not-allowed"] * 3
