"""The environment commands run in: non-interactive defaults, caller values, guards.

Agents cannot answer prompts or drive pagers, so every tool that might wait on
a person is told not to. Guard keys are applied last because a caller that
re-enables an editor or a password prompt would hang the command.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping

from bashrpc.server.runtime.seam import noterminal

NON_INTERACTIVE_DEFAULTS: dict[str, str] = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "GH_PAGER": "cat",
    "SYSTEMD_PAGER": "cat",
    "BAT_PAGER": "cat",
    "PSQL_PAGER": "cat",
    "MYSQL_PAGER": "cat",
    "DELTA_PAGER": "cat",
    "AWS_PAGER": "",
    "LESS": "FRX",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "PYTHONUNBUFFERED": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "npm_config_yes": "true",
    "npm_config_update_notifier": "false",
    "npm_config_fund": "false",
    "npm_config_audit": "false",
    "npm_config_progress": "false",
    "CARGO_TERM_PROGRESS_WHEN": "never",
    "GH_PROMPT_DISABLED": "1",
    "TF_INPUT": "0",
    "COMPOSER_NO_INTERACTION": "1",
    "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
}

TERMINAL_TERM = "xterm-256color"

GUARDS: dict[str, str] = {
    **dict.fromkeys(noterminal.EDITOR_VARIABLES, noterminal.EDITOR),
    "GIT_TERMINAL_PROMPT": "0",
    "SSH_ASKPASS": "false",
    "GIT_ASKPASS": "false",
    "CI": "1",
}


def excluding(inherited: Mapping[str, str], patterns: list[str]) -> dict[str, str]:
    """The server's variables minus those matching any glob (`env.exclude`)."""
    return {
        name: value
        for name, value in inherited.items()
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
    }


def build(inherited: Mapping[str, str], *overlays: Mapping[str, str] | None) -> dict[str, str]:
    """inherited < defaults < each overlay in order < guards."""
    env = dict(inherited)
    env.update(NON_INTERACTIVE_DEFAULTS)
    for overlay in overlays:
        if overlay:
            env.update(overlay)
    env.update(GUARDS)
    env["PATH"] = noterminal.first_on_path(env.get("PATH", os.defpath))
    return env


def without_guards(values: Mapping[str, str] | None) -> dict[str, str]:
    """Per-command values, minus the keys a caller may not override."""
    if not values:
        return {}
    return {k: v for k, v in values.items() if k not in GUARDS}


# Set by a terminal's shell for its own size; read by tput, ncurses, Python...
TERMINAL_SIZE_VARS = ("COLUMNS", "LINES")


def for_terminal(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """A PTY's environment: a terminal is really there, so say so and allow colour.

    The server's own COLUMNS and LINES describe some other terminal; programs
    prefer them to the PTY's size, so they go and the PTY answers instead. An
    editor works there, so the editor variables go too, and programs pick their
    own (git its `core.editor`)."""
    env = dict(base)
    env.update(without_guards(extra))
    for name in noterminal.EDITOR_VARIABLES:
        if env.get(name) == noterminal.EDITOR:
            del env[name]
    env["TERM"] = TERMINAL_TERM
    for name in ("NO_COLOR", *TERMINAL_SIZE_VARS):
        env.pop(name, None)
    return env
