"""The subcommands' options, argparse only: building the parser imports
none of a subcommand's code, so serving stdio never pays for `daemon`,
`record` or `replay` (`main` imports each in its own branch)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bashrpc.protocol import messages
from bashrpc.server.cli.options import add_server_options

# An idle daemon (no connection, no session) exits after this long.
DEFAULT_IDLE_EXIT_SECONDS = 300.0
# A client's sessions outlive its last connection for this long.
DEFAULT_DETACH_GRACE_SECONDS = 300.0
# How long one wait for the server may last before the replay goes on.
DEFAULT_WAIT_SECONDS = 60.0


def _socket_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        type=Path,
        default=None,
        metavar="PATH",
        help="the daemon's unix socket (default: $XDG_RUNTIME_DIR/bashrpc/daemon.sock, "
        "else /tmp/bashrpc-UID/daemon.sock); its directory must be private (0700)",
    )


def add_daemon_and_attach(sub: Any) -> None:
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


def _listen_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        action="append",
        default=None,
        metavar="URL",
        help="also serve here (repeatable): ws://HOST:PORT for WebSocket connections, one "
        "message per text frame (needs pip install 'bashrpc[ws]'), or "
        "http://HOST:PORT/PATH for MCP's Streamable HTTP; TLS belongs to a router or sidecar",
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


def add_record(sub: Any) -> None:
    record = sub.add_parser(
        "record",
        help="run a server for a host and write the session as a transcript",
        description=messages.RECORD_DESCRIPTION,
        usage=messages.RECORD_USAGE,
    )
    record.add_argument("--out", type=Path, required=True, metavar="FILE", help="the transcript")
    record.add_argument(
        "--rule",
        nargs=3,
        action="append",
        default=[],
        metavar=("FIELD", "REGEX", "REPLACEMENT"),
        help="a normalization rule of the host's own, written into the header",
    )


def add_replay(sub: Any) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay transcripts against a fresh server and compare what it says",
        description=messages.REPLAY_DESCRIPTION,
        usage=messages.REPLAY_USAGE,
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="transcripts")
    parser.add_argument(
        "--update", action="store_true", help="rewrite each transcript's expected side"
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="run the header's server arguments even where they could loosen the sandbox",
    )
    parser.add_argument(
        "--fixture",
        type=Path,
        default=None,
        metavar="DIR",
        help="copy this directory in as the workspace (default: the header's, else empty)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"the longest wait for the server before going on (default {DEFAULT_WAIT_SECONDS:g})",
    )


def add_artifact(sub: Any) -> None:
    show = sub.add_parser(
        "artifact",
        help="print an artifact (a long command's full output) to stdout",
        description=messages.ARTIFACT_DESCRIPTION,
    )
    show.add_argument("id", type=int, help="the N of artifact://N")
    show.add_argument(
        "--workspace",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the workspace of the server that made it (default: the current directory)",
    )
    owner = show.add_mutually_exclusive_group()
    owner.add_argument(
        "--client-id",
        metavar="ID",
        help="under the daemon: the clientId whose artifact it is",
    )
    owner.add_argument(
        "--scope", metavar="NAME", help="under the daemon: the shared scope whose artifact it is"
    )
    show.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="settings TOML file")
    show.add_argument(
        "--artifacts-dir", type=Path, default=argparse.SUPPRESS, help="where full outputs are kept"
    )
