"""The server's command-line options, shared by `serve` and by `exec`, which
passes them on to the server it starts."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bashrpc.protocol import messages
from bashrpc.protocol.methods import MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS
from bashrpc.server.settings import (
    MAX_CLIENT_TIMEOUT_SECONDS,
    MAX_DRAIN_SECONDS,
    NETWORK_MODES,
    ON_EOF_CHOICES,
    SANDBOX_STRICTNESS,
    network_entry_error,
)

FORWARDED = (
    "config",
    "artifacts_dir",
    "workspace",
    "max_line_bytes",
    "sandbox",
    "network",
    "client_timeout",
    "drain_seconds",
)


def _seconds(text: str, low: float, high: float, low_allowed: bool) -> float:
    """A finite number of seconds in the range (a usage error otherwise)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    above_low = seconds >= low if low_allowed else seconds > low
    if not (above_low and seconds <= high):
        bracket = "[" if low_allowed else "("
        raise argparse.ArgumentTypeError(
            messages.CLI_BAD_SECONDS.format(value=text, range=f"{bracket}{low:g}, {high:g}]")
        )
    return seconds


def network_entry(text: str) -> str:
    """`--network-allow`: an entry the allowlist can match, or a usage error."""
    why = network_entry_error(text)
    if why is not None:
        raise argparse.ArgumentTypeError(messages.CLI_BAD_NETWORK_ENTRY.format(entry=text, why=why))
    return text


def client_timeout(text: str) -> float:
    return _seconds(text, 0, MAX_CLIENT_TIMEOUT_SECONDS, low_allowed=False)


def drain_seconds(text: str) -> float:
    return _seconds(text, 0, MAX_DRAIN_SECONDS, low_allowed=True)


def command_timeout(text: str) -> float:
    """`exec --timeout`: within the range a `bash` request takes, never clamped
    here, so a typo cannot silently become another deadline (or none)."""
    return _seconds(text, MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, low_allowed=True)


def add_server_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--config", type=Path, default=default, help="settings TOML file")
    parser.add_argument(
        "--artifacts-dir", type=Path, default=default, help="where full outputs are kept"
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        default=default,
        metavar="DIR",
        help="the workspace: where shells start and whose artifacts they keep "
        "(default: the current directory)",
    )
    # The flag's first name, kept working for the command lines that use it.
    parser.add_argument(
        "--cwd", dest="workspace", type=Path, default=default, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--max-line-bytes", type=int, default=default, help="largest accepted request line"
    )
    parser.add_argument(
        "--sandbox",
        default=default,
        choices=SANDBOX_STRICTNESS,
        help="run shells in this bubblewrap sandbox (overrides the settings' sandbox.mode)",
    )
    add_network_options(parser, default)
    parser.add_argument(
        "--client-timeout",
        type=client_timeout,
        default=default,
        metavar="SECONDS",
        help="shut down as on EOF when the client sends nothing for this long "
        "(ping at a third of it); default: never",
    )
    parser.add_argument(
        "--drain-seconds",
        type=drain_seconds,
        default=default,
        metavar="SECONDS",
        help="on SIGTERM, refuse new commands and let running ones finish for this "
        "long before aborting them; default: 0 (shut down at once)",
    )
    parser.add_argument(
        "--log-level",
        default=argparse.SUPPRESS if suppress else "WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stderr log level",
    )


def add_network_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--network",
        default=default,
        choices=NETWORK_MODES,
        help="what a confined command may reach: loopback only, an allowlist through "
        "the server's proxy, or the host's network (overrides sandbox.network.mode)",
    )
    parser.add_argument(
        "--network-allow",
        action="append",
        type=network_entry,
        default=default,
        metavar="HOST",
        help="a host (exact, or *.domain for its subdomains) or IP address the "
        "allowlist allows; repeatable; replaces sandbox.network.allow",
    )


def add_eof_option(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The stdio server's own: the end of its stdin (exec and the daemon have none)."""
    parser.add_argument(
        "--on-eof",
        default=argparse.SUPPRESS if suppress else None,
        choices=ON_EOF_CHOICES,
        help="at the end of stdin, finish (run and answer every request read, in order, "
        "then exit) or abort what runs; default: finish for a file or /dev/null, "
        "abort for a pipe",
    )


def server_argv(args: argparse.Namespace) -> list[str]:
    """The options of this invocation, as a child server takes them."""
    argv: list[str] = []
    for flag in FORWARDED:
        value = getattr(args, flag, None)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    for entry in getattr(args, "network_allow", None) or ():
        argv += ["--network-allow", entry]
    argv += ["--log-level", args.log_level]
    return argv


def reprint_options(args: argparse.Namespace, *, local: bool = True) -> list[str]:
    """The options `bashrpc artifact` needs to find what this invocation's server
    wrote; `local`: that server ran here, so a relative workspace is resolved here."""
    argv: list[str] = []
    for flag, option in (("config", "--config"), ("artifacts_dir", "--artifacts-dir")):
        value = getattr(args, flag, None)
        if value is not None:
            argv += [option, str(value)]
    if getattr(args, "workspace", None) is not None:
        workspace = Path(args.workspace).resolve() if local else args.workspace
        argv += ["--workspace", str(workspace)]
    return argv
