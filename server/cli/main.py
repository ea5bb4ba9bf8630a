"""Command line: `bashrpc` serves JSON-RPC on stdio; `bashrpc exec CMD` runs one command."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import msgspec

from bashrpc.protocol import __version__, messages
from bashrpc.protocol.methods import MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS
from bashrpc.server import log
from bashrpc.server.cli import subparsers
from bashrpc.server.cli.options import add_eof_option, add_server_options, command_timeout
from bashrpc.server.output.artifactroot import default_root
from bashrpc.server.runtime.run import env as envmod
from bashrpc.server.settings import MIN_LINE_BYTES, Settings, SettingsError, load

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bashrpc", description="JSON-RPC 2.0 shell server for coding agents, on stdio."
    )
    parser.add_argument("--version", action="version", version=f"bashrpc {__version__}")
    add_server_options(parser, suppress=False)
    add_eof_option(parser, suppress=False)
    sub = parser.add_subparsers(dest="command_name")
    serve = sub.add_parser("serve", help="serve JSON-RPC on stdin/stdout (the default)")
    add_server_options(serve, suppress=True)
    add_eof_option(serve, suppress=True)
    run = sub.add_parser(
        "exec",
        help="run one command through a server and stream its output",
        description=messages.EXEC_DESCRIPTION,
        epilog=messages.EXEC_EPILOG.format(min=MIN_TIMEOUT_SECONDS, max=MAX_TIMEOUT_SECONDS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_server_options(run, suppress=True)
    run.add_argument("command", help="the shell command, run by bash as given")
    run.add_argument(
        "--via",
        metavar="LAUNCHER",
        default=None,
        help="start the server through this launcher, e.g. 'ssh -T host' or "
        "'podman exec -i box' (bashrpc on its PATH there)",
    )
    run.add_argument(
        "--timeout",
        type=command_timeout,
        default=None,
        metavar="SECONDS",
        help=f"kill the command after this long ({MIN_TIMEOUT_SECONDS:g} to "
        f"{MAX_TIMEOUT_SECONDS:g}); exit status 124",
    )
    subparsers.add_daemon_and_attach(sub)
    subparsers.add_record(sub)
    subparsers.add_replay(sub)
    subparsers.add_artifact(sub)
    return parser


def _with_network_flags(args: argparse.Namespace, settings: Settings) -> Settings:
    """`--network` and `--network-allow` over `[sandbox.network]`."""
    mode, allow = getattr(args, "network", None), getattr(args, "network_allow", None)
    if mode is None and allow is None:
        return settings
    net = settings.sandbox.net
    net = msgspec.structs.replace(
        net, mode=mode or net.mode, allow=net.allow if allow is None else tuple(allow)
    )
    return msgspec.structs.replace(
        settings, sandbox=msgspec.structs.replace(settings.sandbox, network=net)
    )


def _drop_excluded_environment(settings: Settings) -> None:
    """Start again without the variables `env.exclude` keeps from commands.

    A command can read its parent's environment in /proc/$PPID/environ, and the
    server is that parent: the variables must be gone from the server itself,
    and a process's initial environment only changes with exec. Once at most:
    the second start has nothing to drop."""
    kept = envmod.excluding(os.environ, settings.env_exclude)
    if len(kept) == len(os.environ):
        return
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], kept)


def _artifacts_root(args: argparse.Namespace, settings: Settings) -> Path:
    if args.artifacts_dir is not None:
        return Path(args.artifacts_dir)
    if settings.artifacts.dir:
        return Path(settings.artifacts.dir).expanduser()
    return default_root()


def _fail(message: str) -> int:
    print(messages.CLI_ERROR.format(message=message), file=sys.stderr)
    return EXIT_USAGE


# Subcommands that start a server of their own, its arguments after `--`.
TRANSCRIPT_COMMANDS = ("record", "replay")


def split_server_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`record`/`replay` ... `--` SERVER_ARGS: the arguments before `--` and those
    after (None when there is no `--`). argparse would take them as more files."""
    if not argv or argv[0] not in TRANSCRIPT_COMMANDS or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


# Subcommands that run no server in this process: a client, or a proxy.
CLIENT_COMMANDS = ("record", "replay", "exec", "attach")


def _run_client(args: argparse.Namespace, server_args: list[str] | None) -> int:
    """Each subcommand's code is imported in its branch: serving pays for none."""
    if args.command_name == "record":
        from bashrpc.server.cli import record

        return record.run_record(args, server_args or [])
    if args.command_name == "replay":
        from bashrpc.server.cli import replay

        return replay.run_replay(args, server_args)
    if args.command_name == "exec":
        from bashrpc.server.cli.exec import run_exec

        return run_exec(args)
    from bashrpc.server.cli import daemon

    return daemon.run_attach(args)


def main(argv: list[str] | None = None) -> int:
    own, server_args = split_server_args(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(own)
    if args.command_name in CLIENT_COMMANDS:
        return _run_client(args, server_args)
    log.setup(args.log_level)
    try:
        settings = load(args.config)
    except SettingsError as exc:
        return _fail(str(exc))
    if args.sandbox is not None:
        sandbox = msgspec.structs.replace(settings.sandbox, mode=args.sandbox)
        settings = msgspec.structs.replace(settings, sandbox=sandbox)
    settings = _with_network_flags(args, settings)
    if args.command_name == "artifact":
        # Each subcommand's code is imported in its branch: serving pays for none.
        from bashrpc.server.cli import artifact
        from bashrpc.server.daemon.tenants import tenant_key

        owner = tenant_key(args.client_id, args.scope)
        return artifact.print_artifact(
            args.id, _artifacts_root(args, settings), args.workspace, owner
        )
    if args.max_line_bytes is not None:
        if args.max_line_bytes < MIN_LINE_BYTES:
            return _fail(messages.CLI_LINE_LIMIT_TOO_SMALL.format(minimum=MIN_LINE_BYTES))
        settings = msgspec.structs.replace(settings, max_line_bytes=args.max_line_bytes)
    for name in ("client_timeout", "drain_seconds", "on_eof"):
        if getattr(args, name) is not None:
            server = msgspec.structs.replace(settings.server, **{name: getattr(args, name)})
            settings = msgspec.structs.replace(settings, server=server)
    return _serve(args, settings)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    _drop_excluded_environment(settings)
    shell = settings.shell or shutil.which("bash") or "/bin/bash"
    shell = shutil.which(shell) or shell
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
        return _fail(messages.CLI_SHELL_NOT_EXECUTABLE.format(shell=shell))
    workspace = (args.workspace or Path.cwd()).resolve()
    if not workspace.is_dir():
        return _fail(messages.CLI_WORKSPACE_NOT_DIRECTORY.format(path=workspace))
    artifacts_dir = _artifacts_root(args, settings)
    # Here, not at the top: `exec` and `--help` never pay for the server's imports.
    import anyio

    from bashrpc.server.runtime.instance import Options
    from bashrpc.server.serve import serve

    options = Options(
        settings=settings, workspace=workspace, shell=shell, artifacts_dir=artifacts_dir
    )
    use_uvloop = settings.uvloop and importlib.util.find_spec("uvloop") is not None
    backend = {"use_uvloop": use_uvloop}
    if args.command_name == "daemon":
        from bashrpc.server.cli import daemon
        from bashrpc.server.daemon.server import run_daemon

        also = daemon.claim_listener(args, settings.max_line_bytes)
        if isinstance(also, int):
            return also
        http = daemon.claim_http(args, settings.server.http)
        if isinstance(http, int):
            return http
        sock = daemon.claim_socket(args)
        if isinstance(sock, int):
            return sock
        idle, grace = daemon.idle_seconds(args), daemon.detach_grace(args)
        path = daemon.socket_path(args)
        secrets = () if args.token_file is None else (args.token_file,)
        run = (options, path, sock, idle, grace, also, http, secrets)
        return anyio.run(run_daemon, *run, backend_options=backend)
    return anyio.run(serve, options, backend_options=backend)
