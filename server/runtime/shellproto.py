"""What a persistent shell is sent and what it reports back (pure).

Everything here must work under the user's `set -u`: every expansion of a
variable that may be unset has a default.

The shell reads a driver line, then the command's fields NUL-terminated, so
no byte of a command is ever parsed by the server. It `eval`s the command
with its output in a FIFO, then writes a status record to the status pipe:
``traps\\0status\\0pwd\\0flags\\0lastjob\\0``: `trap -p` of the debugging
traps (empty most of the time, and then the record is a single write), the
exit status, the working directory, `$-` and `$!`.

The user's DEBUG, ERR and RETURN traps and `set -x` must never show the
driver's own steps. So the record's last act is to suspend them, and the
next command restores them from the record at the start of its `eval`,
where they apply to the user's commands alone. (Until they are suspended,
a DEBUG trap still runs before the three steps that read and clear the
traps, with its output in /dev/null.) ERR needs one thing more: when the
user's last command fails, `eval` fails too and would fire ERR a second
time, so the restored ERR trap skips exactly that one firing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

import msgspec

SNAPSHOT_ENV = "BASHRPC_SNAPSHOT"
# Replays the user's rc snapshot; its own output and errors are not the command's.
SOURCE_SNAPSHOT = f'\\command source "${SNAPSHOT_ENV}" >/dev/null 2>&1 </dev/null'
SUSPENDED_TRAPS = ("DEBUG", "ERR", "RETURN")
RECORD_FIELDS = 5
# The output FIFO, the cwd and the command; the per-command variables follow.
FIXED_FIELDS = 3
# Where `eval` numbers the lines of its text from: its own line, less one. The
# subscript assigns LINENO (bash's parse line) while the eval's words expand,
# after its line was set and before its text is parsed, and expands to nothing.
RESET_LINENO = "${{__bashrpc_nil[LINENO={line}]-}}"
# The one simple command that runs the user's text, whose first line (the restore
# prefix) is line 0, so the user's own lines are numbered as `bash -c` numbers
# them; ERR skips its failure.
_EVAL = '\\command eval "$__bashrpc_cmd" ' + RESET_LINENO.format(line=0)
# The ERR trap as restored: the user's code lives in a variable.
ERR_WRAPPER = '__bashrpc_skip_err || \\command eval "$__bashrpc_err"'


def after_snapshot(command: str) -> str:
    """A `bash -c` text that replays the rc snapshot, then runs `command`: on a
    line of its own, so it is parsed after the snapshot's aliases exist, under
    `eval`, so its lines are numbered from 1 as in a `bash -c` of its own."""
    reset = RESET_LINENO.format(line=1)
    return f"{SOURCE_SNAPSHOT}\n\\command eval {reset} {shlex.quote(command)}"


def bootstrap(status_fd: int, fields_path: str, snapshot: bool) -> bytes:
    """Defines the driver; sent once, before the first command.

    bash reads a pipe one byte per system call, so what crosses the control
    pipe per command is as short as can be: the alias `__bashrpc_go`, whose
    text bash expands in memory and runs at the top level (as the user's
    `eval` must run, and as reading and clearing traps must). The command's
    fields travel in a file, read with one `mapfile`. The driver line puts
    the alias and alias expansion back after every command, so a user's
    `unalias -a` costs nothing.
    """
    source = f"{SOURCE_SNAPSHOT}\n" if snapshot else ""
    return (
        f"""
set +o history 2>/dev/null
{source}__bashrpc_in={shlex.quote(fields_path)}
__bashrpc_line={shlex.quote(_line(status_fd, []))}
__bashrpc_recv() {{
  \\builtin mapfile -d '' -n "$1" -t __bashrpc_f < "$__bashrpc_in" || return 1
  __bashrpc_out=${{__bashrpc_f[0]}} __bashrpc_cwd=${{__bashrpc_f[1]}}
  __bashrpc_cmd=${{__bashrpc_f[2]}}
  __bashrpc_env=("${{__bashrpc_f[@]:3}}")
}}
__bashrpc_cd() {{
  [[ -z $__bashrpc_cwd || $__bashrpc_cwd == "$PWD" ]] || \\command cd -- "$__bashrpc_cwd"
}}
__bashrpc_done() {{
  \\command printf '\\0%s\\0%s\\0%s\\0%s\\0' "$1" "$PWD" "$-" "${{!-}}" >&{status_fd}
  \\builtin set +x
}}
__bashrpc_skip_err() {{
  local __bashrpc_s=$?
  [[ $BASH_COMMAND == *'{_EVAL}' ]] && return 0
  return "$__bashrpc_s"
}}
shopt -s expand_aliases
\\builtin alias __bashrpc_go="$__bashrpc_line"
"""
    ).encode()


def _line(status_fd: int, env_names: list[str]) -> str:
    assigns = "".join(f'{name}="${{__bashrpc_env[{i}]}}" ' for i, name in enumerate(env_names))
    traps = " ".join(SUSPENDED_TRAPS)
    # Traps are read and cleared at the top level: a function would see none,
    # and what it cleared would come back when it returned.
    return (
        f"__bashrpc_recv {FIXED_FIELDS + len(env_names)} && "
        f"{{ __bashrpc_cd && {assigns}{_EVAL}; }} "
        f'</dev/null >"$__bashrpc_out" 2>&1 {status_fd}>&-; __bashrpc_status=$?; '
        f"\\builtin trap -p {traps} >&{status_fd}; \\builtin trap - {traps}; "
        # Put the alias back only if the user's command took it away.
        "[[ $BASHOPTS == *expand_aliases* && ${BASH_ALIASES[__bashrpc_go]-} ]] || "
        '{ \\builtin shopt -s expand_aliases; \\builtin alias __bashrpc_go="$__bashrpc_line"; }; '
        '__bashrpc_done "$__bashrpc_status"'
    )


def driver_line(status_fd: int, env_names: list[str]) -> bytes:
    """What runs one command: the alias, or, with per-command variables (whose
    validated names are spliced in), the whole line."""
    if not env_names:
        return b"__bashrpc_go\n"
    return (_line(status_fd, env_names) + "\n").encode()


def command_fields(
    *, output: str, cwd: str | None, prefix: str, command: str, env: Mapping[str, str]
) -> bytes:
    """The fields file: the FIFO, the cwd, the command (on the line after the
    restore prefix, a line of its own), env values.

    It is rewritten in place, never truncated (that cost more than the rest
    of a command on ext4): the driver reads exactly as many fields as it wrote."""
    text = os.fsencode(prefix) + b"\n" + command.encode()
    fields = [os.fsencode(output), os.fsencode(cwd or ""), text]
    fields += [value.encode() for value in env.values()]
    return b"".join(f + b"\0" for f in fields)


class StatusRecord(msgspec.Struct, frozen=True):
    status: int
    # Undecodable bytes are kept as surrogates (os.fsdecode).
    pwd: str
    flags: str
    traps: str
    # `$!`: the pid of the newest background job. When a command changes it,
    # that command started jobs, and they may hold its output open.
    last_job: int | None = None

    def restore_prefix(self) -> str:
        """Shell text, on one line, that puts the suspended traps and `set -x` back."""
        if not self.traps and "x" not in self.flags:
            return ""
        lines = []
        for signal, code in parse_traps(self.traps).items():
            if signal == "ERR":
                if code != ERR_WRAPPER:
                    lines.append(f"__bashrpc_err={_quote_on_one_line(code)}")
                code = ERR_WRAPPER
            lines.append(f"\\builtin trap -- {_quote_on_one_line(code)} {signal}")
        if "x" in self.flags:
            lines.append("\\builtin set -x")
        return "; ".join(lines)


def _quote_on_one_line(text: str) -> str:
    """A shell word for `text` with no newline in it: the restore prefix is one line."""
    if "\n" not in text:
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"$'{escaped}'"


def parse_traps(text: str) -> dict[str, str]:
    """`trap -p` output as {signal: code}; bash quotes it, so shlex reads it back."""
    words = shlex.split(text)
    out: dict[str, str] = {}
    while len(words) >= 4 and words[0] == "trap" and words[1] == "--":
        out[words[3]] = words[2]
        words = words[4:]
    return out


class RecordReader:
    """Splits the status pipe's bytes into records."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[StatusRecord]:
        self._buf += data
        records: list[StatusRecord] = []
        while True:
            fields = self._buf.split(b"\0", RECORD_FIELDS)
            if len(fields) <= RECORD_FIELDS:
                return records
            traps, status, pwd, flags, last_job, rest = fields
            self._buf = bytearray(rest)
            records.append(
                StatusRecord(
                    status=int(status),
                    pwd=os.fsdecode(bytes(pwd)),
                    flags=flags.decode("ascii", "replace"),
                    traps=traps.decode("utf-8", "surrogateescape"),
                    last_job=int(last_job) if last_job else None,
                )
            )
