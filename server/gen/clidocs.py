"""The command-line reference page, rendered from the parser `bashrpc` runs.

argparse has no public way to list a parser's arguments, so this reads its
`_actions` (as every argparse documenter does); the page's test catches a change.
"""

from __future__ import annotations

import argparse

from bashrpc.server.cli.main import build_parser
from bashrpc.server.gen.mdtable import anchor, cell, table

_INTRO = """\
Every command and option of `bashrpc`, generated from its argparse parser
(`server/cli/`). The guide says when to use which: [Settings](../settings.md)
for the server's options, [Running remotely and in containers](../remote-and-containers.md)
for `exec --via`, [Sessions and the daemon](../sessions-and-daemon.md) for
`daemon` and `attach`."""


def _argument(action: argparse.Action) -> str:
    if not action.option_strings or action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " or ".join(f"`{choice}`" for choice in action.choices)
    return f"`{action.metavar or action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or action.dest == "help":
            continue
        if isinstance(action, argparse._SubParsersAction):
            continue
        name = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
        rows.append([name, _argument(action), _default(action), cell(action.help or "")])
    return table(["option", "argument", "default", "description"], rows)


def _command(title: str, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"## `{title}` {{#{anchor('', title)}}}", ""]
    if summary:
        lines += [cell(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description:
        lines += ["```text", parser.description.rstrip(), "```", ""]
    lines += _options(parser)
    if parser.epilog:
        lines += ["```text", parser.epilog.rstrip(), "```", ""]
    return lines


def cli_page(banner: str) -> str:
    parser = build_parser()
    lines = [banner, "", "# Command-line reference", "", _INTRO, ""]
    lines += _command("bashrpc", "", parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                lines += _command(f"bashrpc {name}", helps.get(name, ""), sub)
    return "\n".join(lines).rstrip("\n") + "\n"
