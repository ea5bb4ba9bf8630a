"""What a persistent shell is sent and what it reports back (pure).

The shell reads a driver line, then the command's fields NUL-terminated, so
no byte of a command is ever parsed by the server. It `eval`s the command
with its output in a FIFO, then writes a status record to the status pipe:
``status\\0pwd\\0flags\\0traps\\0`` (the exit status, the working directory,
`$-`, and `trap -p` of the debugging traps).

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
from dataclasses import dataclass

SNAPSHOT_ENV = "BASHRPC_SNAPSHOT"
# Replays the user's rc snapshot; its own output and errors are not the command's.
SOURCE_SNAPSHOT = f'\\command source "${SNAPSHOT_ENV}" >/dev/null 2>&1 </dev/null'
SUSPENDED_TRAPS = ("DEBUG", "ERR", "RETURN")
RECORD_FIELDS = 4
# The one simple command that runs the user's text; ERR skips its failure.
_EVAL = '\\command eval "$__bashrpc_pre$__bashrpc_cmd"'
# The ERR trap as restored: the user's code lives in a variable.
ERR_WRAPPER = '__bashrpc_skip_err || \\command eval "$__bashrpc_err"'


def bootstrap(status_fd: int, snapshot: bool) -> bytes:
    """Defines the driver's functions; sent once, before the first command."""
    source = f"{SOURCE_SNAPSHOT}\n" if snapshot else ""
    return (
        f"""
set +o history 2>/dev/null
shopt -s expand_aliases
{source}__bashrpc_recv() {{
  IFS= \\command read -r -d '' __bashrpc_out || return 1
  IFS= \\command read -r -d '' __bashrpc_cwd || return 1
  IFS= \\command read -r -d '' __bashrpc_pre || return 1
  IFS= \\command read -r -d '' __bashrpc_cmd || return 1
  __bashrpc_env=()
  local __bashrpc_i __bashrpc_v
  for ((__bashrpc_i = 0; __bashrpc_i < $1; __bashrpc_i++)); do
    IFS= \\command read -r -d '' __bashrpc_v || return 1
    __bashrpc_env+=("$__bashrpc_v")
  done
}}
__bashrpc_cd() {{ [[ -z $__bashrpc_cwd ]] || \\command cd -- "$__bashrpc_cwd"; }}
__bashrpc_done() {{
  \\command printf '%s\\0%s\\0%s\\0' "$1" "$PWD" "$-" >&{status_fd}
  \\builtin set +x
}}
__bashrpc_end() {{ \\command printf '\\0' >&{status_fd}; }}
__bashrpc_skip_err() {{
  local __bashrpc_s=$?
  [[ $BASH_COMMAND == *'{_EVAL}' ]] && return 0
  return "$__bashrpc_s"
}}
"""
    ).encode()


def driver_line(status_fd: int, env_names: list[str]) -> bytes:
    """The shell line that runs one command. Only validated names are spliced in."""
    assigns = "".join(f'{name}="${{__bashrpc_env[{i}]}}" ' for i, name in enumerate(env_names))
    traps = " ".join(SUSPENDED_TRAPS)
    # Traps are read and cleared at the top level: a function would see none,
    # and what it cleared would come back when it returned.
    return (
        f"__bashrpc_recv {len(env_names)} && "
        f"{{ __bashrpc_cd && {assigns}{_EVAL}; }} "
        f'</dev/null >"$__bashrpc_out" 2>&1 {status_fd}>&-; __bashrpc_done $?; '
        f"\\builtin trap -p {traps} >&{status_fd}; \\builtin trap - {traps}; __bashrpc_end\n"
    ).encode()


def command_payload(
    status_fd: int,
    *,
    output: str,
    cwd: str | None,
    prefix: str,
    command: str,
    env: Mapping[str, str],
) -> bytes:
    names = list(env)
    fields = [os.fsencode(output), os.fsencode(cwd or ""), os.fsencode(prefix), command.encode()]
    fields += [env[n].encode() for n in names]
    return driver_line(status_fd, names) + b"".join(f + b"\0" for f in fields)


@dataclass(frozen=True, slots=True)
class StatusRecord:
    status: int
    # Undecodable bytes are kept as surrogates (os.fsdecode).
    pwd: str
    flags: str
    traps: str

    def restore_prefix(self) -> str:
        """Shell text that puts the suspended traps and `set -x` back."""
        lines = []
        for signal, code in parse_traps(self.traps).items():
            if signal == "ERR":
                if code != ERR_WRAPPER:
                    lines.append(f"__bashrpc_err={shlex.quote(code)}")
                code = ERR_WRAPPER
            lines.append(f"\\builtin trap -- {shlex.quote(code)} {signal}")
        if "x" in self.flags:
            lines.append("\\builtin set -x")
        return "".join(f"{line}\n" for line in lines)


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
            status, pwd, flags, traps, rest = fields
            self._buf = bytearray(rest)
            records.append(
                StatusRecord(
                    status=int(status),
                    pwd=os.fsdecode(bytes(pwd)),
                    flags=flags.decode("ascii", "replace"),
                    traps=traps.decode("utf-8", "surrogateescape"),
                )
            )
