"""Command line: `bashrpc` serves JSON-RPC on stdio; `bashrpc exec CMD` runs one command."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from protocol import __version__, messages
from server import log
from server.settings import MIN_LINE_BYTES, Settings, SettingsError, load

EXIT_USAGE = 2


def _server_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument("--config", type=Path, default=default, help="settings TOML file")
    parser.add_argument(
        "--artifacts-dir", type=Path, default=default, help="where full outputs are kept"
    )
    parser.add_argument(
        "--cwd", type=Path, default=default, help="workspace directory (default: current)"
    )
    parser.add_argument(
        "--max-line-bytes", type=int, default=default, help="largest accepted request line"
    )
    parser.add_argument(
        "--log-level",
        default=argparse.SUPPRESS if suppress else "WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="stderr log level",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bashrpc", description="JSON-RPC 2.0 shell server for coding agents, on stdio."
    )
    parser.add_argument("--version", action="version", version=f"bashrpc {__version__}")
    _server_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command_name")
    serve = sub.add_parser("serve", help="serve JSON-RPC on stdin/stdout (the default)")
    _server_options(serve, suppress=True)
    run = sub.add_parser("exec", help="run one command through a server and stream its output")
    _server_options(run, suppress=True)
    run.add_argument("command", help="the shell command")
    run.add_argument(
        "--timeout", type=float, default=None, help="seconds before the command is killed"
    )
    run.add_argument("--session", default=None, help="session id")
    return parser


def server_argv(args: argparse.Namespace) -> list[str]:
    """The options of this invocation, as a child server takes them."""
    argv: list[str] = []
    for flag in ("config", "artifacts_dir", "cwd", "max_line_bytes"):
        value = getattr(args, flag, None)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    argv += ["--log-level", args.log_level]
    return argv


def _fail(message: str) -> int:
    print(messages.CLI_ERROR.format(message=message), file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command_name == "exec":
        from server.client import run_exec

        return run_exec(args)
    log.setup(args.log_level)
    try:
        settings = load(args.config)
    except SettingsError as exc:
        return _fail(str(exc))
    if args.max_line_bytes is not None:
        if args.max_line_bytes < MIN_LINE_BYTES:
            return _fail(messages.CLI_LINE_LIMIT_TOO_SMALL.format(minimum=MIN_LINE_BYTES))
        settings = _replace(settings, max_line_bytes=args.max_line_bytes)
    return _serve(args, settings)


def _replace(settings: Settings, **changes: object) -> Settings:
    import msgspec

    return msgspec.structs.replace(settings, **changes)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    shell = settings.shell or shutil.which("bash") or "/bin/bash"
    shell = shutil.which(shell) or shell
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
        return _fail(messages.CLI_SHELL_NOT_EXECUTABLE.format(shell=shell))
    workspace = (args.cwd or Path.cwd()).resolve()
    if not workspace.is_dir():
        return _fail(messages.CLI_CWD_NOT_DIRECTORY.format(path=workspace))
    from server.artifacts import default_dir

    artifacts_dir = args.artifacts_dir or (
        Path(settings.artifacts.dir).expanduser() if settings.artifacts.dir else default_dir()
    )
    import anyio

    from server.app import Options, serve

    options = Options(
        settings=settings, workspace=workspace, shell=shell, artifacts_dir=artifacts_dir
    )
    return anyio.run(serve, options)
