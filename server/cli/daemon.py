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
from bashrpc.server.cli.options import server_argv
from bashrpc.server.daemon import socketpath, wsconfig

EXIT_FAILURE = 1
EXIT_USAGE = 2


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


def claim_listener(args: argparse.Namespace, max_message_bytes: int) -> Any:
    """The listeners to run beside the socket (None without --listen), bound
    already; or an exit status when one can't run as asked."""
    from bashrpc.server.daemon.server import together

    listens = []
    for url in args.listen or ():
        claim = _claim_http if url.startswith(wsconfig.HTTP_SCHEME + ":") else _claim_ws
        listen = claim(args, url, max_message_bytes)
        if isinstance(listen, int):
            return listen
        listens.append(listen)
    return together(listens) if listens else None


def _claim_ws(args: argparse.Namespace, url: str, max_message_bytes: int) -> Any:
    if importlib.util.find_spec("websockets") is None:
        return _refused(messages.WS_NEEDS_LIBRARY, EXIT_USAGE)
    from bashrpc.server.daemon import websocket

    try:
        address = wsconfig.parse_listen(url)
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


def _claim_http(args: argparse.Namespace, url: str, max_message_bytes: int) -> Any:
    """Streamable HTTP: on loopback the daemon's own uid needs no token; any
    other address needs --token-file."""
    from bashrpc.server.daemon import mcphttp

    try:
        address, path = wsconfig.parse_http_listen(url)
        token = None if args.token_file is None else wsconfig.read_token(args.token_file)
        if token is None and not address.loopback:
            raise wsconfig.ListenError(
                messages.MCP_HTTP_NO_TOKEN.format(url=url, host=address.host)
            )
    except wsconfig.ListenError as exc:
        return _refused(exc, EXIT_USAGE)
    try:
        sock = mcphttp.bind(address)
    except OSError as exc:
        return _refused(
            messages.DAEMON_CANNOT_BIND.format(path=url, reason=exc.strerror), EXIT_FAILURE
        )
    listener = mcphttp.McpHttpListener(address, path, sock, token, max_message_bytes)
    return functools.partial(mcphttp.listen, listener)


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
