"""The `daemon` and `attach` subcommands: their options, and the daemon's start."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import ConnectionSettings, HostOptions, SandboxOverrides
from bashrpc.server.cli.options import add_server_options, server_argv
from bashrpc.server.daemon import socketpath, wsconfig

# An idle daemon (no connection, no session) exits after this long.
DEFAULT_IDLE_EXIT_SECONDS = 300.0
# A client's sessions outlive its last connection for this long.
DEFAULT_DETACH_GRACE_SECONDS = 300.0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _socket_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        type=Path,
        default=None,
        metavar="PATH",
        help="the daemon's unix socket (default: $XDG_RUNTIME_DIR/bashrpc/daemon.sock, "
        "else /tmp/bashrpc-UID/daemon.sock); its directory must be private (0700)",
    )


def add_parsers(sub: Any) -> None:
    daemon = sub.add_parser(
        "daemon",
        help="serve many connections on a unix socket, one runtime each",
        description=messages.DAEMON_DESCRIPTION,
    )
    add_server_options(daemon, suppress=True)
    _socket_option(daemon)
    daemon.add_argument(
        "--idle-exit",
        type=float,
        default=DEFAULT_IDLE_EXIT_SECONDS,
        metavar="SECONDS",
        help="exit once no connection or session has been there for this long "
        f"(default {DEFAULT_IDLE_EXIT_SECONDS:g})",
    )
    daemon.add_argument("--stay", action="store_true", help="never exit for idleness")
    _listen_options(daemon)
    _http_options(daemon)
    daemon.add_argument(
        "--detach-grace",
        type=float,
        default=DEFAULT_DETACH_GRACE_SECONDS,
        metavar="SECONDS",
        help="keep a clientId's sessions this long after its last connection ends "
        f"(default {DEFAULT_DETACH_GRACE_SECONDS:g})",
    )
    attach = sub.add_parser(
        "attach",
        help="bridge stdio to the daemon's socket, starting the daemon if none runs",
        description=messages.ATTACH_DESCRIPTION,
    )
    add_server_options(attach, suppress=True)
    _socket_option(attach)


def _http_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="also serve plain HTTP here: GET /livez, /readyz (/v1/health) and /metrics "
        "(metrics need pip install 'bashrpc[metrics]'); loopback, or --token-file "
        "(default: the server.http setting)",
    )
    parser.add_argument(
        "--http-open-probes",
        action="store_true",
        help="let /livez and /readyz answer without the token, for a kubelet's httpGet "
        "probes (they carry only fixed words); /metrics still needs it",
    )


def claim_http(args: argparse.Namespace, configured: str | None) -> Any:
    """The probes' listener (None without --http or the setting), bound already;
    or an exit status when it can't run as asked."""
    from bashrpc.server.daemon import health

    text = args.http or configured
    if text is None:
        return None
    try:
        address = health.parse_address(text)
        token = None if args.token_file is None else wsconfig.read_token(args.token_file)
        health.check_start(address, token, args.http_open_probes)
    except wsconfig.ListenError as exc:
        return _refused(exc, EXIT_USAGE)
    try:
        sock = health.bind(address)
    except OSError as exc:
        reason = messages.DAEMON_CANNOT_BIND.format(path=text, reason=exc.strerror)
        return _refused(reason, EXIT_FAILURE)
    return health.HttpListener(sock=sock, token=token, open_probes=args.http_open_probes)


def _listen_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=None,
        metavar="ws://HOST:PORT",
        help="also serve WebSocket connections here, one message per text frame "
        "(needs pip install 'bashrpc[ws]'; TLS belongs to a router or sidecar)",
    )
    gate = parser.add_mutually_exclusive_group()
    gate.add_argument(
        "--token-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the bearer token --listen (and a non-loopback --http) requires, read once "
        "(mode 600 or stricter)",
    )
    gate.add_argument(
        "--insecure-loopback",
        action="store_true",
        help="let --listen run without a token, on a loopback address only",
    )


def claim_listener(args: argparse.Namespace, max_message_bytes: int) -> Any:
    """The WebSocket listener to run beside the socket (None without --listen),
    bound already; or an exit status when it can't run as asked."""
    if args.listen is None:
        return None
    if importlib.util.find_spec("websockets") is None:
        return _refused(messages.WS_NEEDS_LIBRARY, EXIT_USAGE)
    from bashrpc.server.daemon import websocket

    try:
        address = wsconfig.parse_listen(args.listen)
        token = None if args.token_file is None else wsconfig.read_token(args.token_file)
        wsconfig.check_start(address, token, args.insecure_loopback)
    except wsconfig.ListenError as exc:
        return _refused(exc, EXIT_USAGE)
    try:
        sock = websocket.bind(address)
    except OSError as exc:
        reason = messages.DAEMON_CANNOT_BIND.format(path=address.url(), reason=exc.strerror)
        return _refused(reason, EXIT_FAILURE)
    listener = websocket.WebSocketListener(address, sock, token, max_message_bytes)
    return functools.partial(websocket.listen, listener)


def _refused(reason: object, status: int) -> int:
    """One line on stderr saying why the daemon or a listener can't run as asked;
    the exit status to end with."""
    print(messages.CLI_ERROR.format(message=reason), file=sys.stderr)
    return status


def socket_path(args: argparse.Namespace) -> Path:
    return Path(os.path.abspath(args.socket or socketpath.default_path()))


def run_attach(args: argparse.Namespace) -> int:
    from bashrpc.server.daemon.attach import attach

    daemon_argv = [sys.executable, "-m", "bashrpc", "daemon", *server_argv(args)]
    return attach(socket_path(args), daemon_argv, attach_options(args))


def attach_options(args: argparse.Namespace) -> HostOptions | None:
    """What `attach`'s own options ask of a daemon that may be running already
    (None: nothing): its --sandbox as a tightening, its --workspace as the one
    the daemon must serve."""
    mode = getattr(args, "sandbox", None)
    workspace = getattr(args, "workspace", None)
    if mode is None and workspace is None:
        return None
    settings = None if mode is None else ConnectionSettings(sandbox=SandboxOverrides(mode=mode))
    served = None if workspace is None else str(Path(workspace).resolve())
    return HostOptions(settings=settings, workspace=served)


def claim_socket(args: argparse.Namespace) -> Any:
    """The daemon's listening socket, bound with the lock held; or an exit status
    when another daemon serves the path or it can't be served safely."""
    path = socket_path(args)
    try:
        socketpath.private_dir(path.parent)
        socketpath.take_lock(path)
        return socketpath.bind(path)
    except (socketpath.SocketPathError, OSError) as exc:
        return _refused(exc, EXIT_FAILURE)


def idle_seconds(args: argparse.Namespace) -> float | None:
    return None if args.stay else max(0.0, float(args.idle_exit))


def detach_grace(args: argparse.Namespace) -> float:
    return max(0.0, float(args.detach_grace))
