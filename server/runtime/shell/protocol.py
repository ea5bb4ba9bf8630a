"""What a persistent shell is sent and what it reports back (pure).

Everything here must work under the user's `set -u`: every expansion of a
variable that may be unset has a default.

The shell reads a driver line, then the command's fields NUL-terminated, so
no byte of a command is ever parsed by the server. It `eval`s the command
with its output in a FIFO, then writes a status record to the status FIFO:
``traps\\0status\\0pwd\\0flags\\0lastjob\\0token\\0``: `trap -p` of the
debugging traps (empty most of the time), the exit status, the working
directory, `$-`, `$!` and the command's token.

The command must not be able to write that record. The driver opens the
status FIFO only after `eval` returns, so the command has no descriptor of
it (a descriptor saved around a redirection, `>&10`, is reachable). The
FIFO's path is: what comes in by it must carry the token, 128 random bits
that the server puts on the driver line, so only the line's text (bash's
memory) holds it, and the record proves it was written by that line. For
the same reason the driver turns `set -v` (which prints lines as they are
read), `set -x` and the history list off before it names the token; the
first two come back with the traps.

The user's DEBUG, ERR and RETURN traps and `set -x` must never show the
driver's own steps. So the record's last act is to suspend them, and the
next command restores them from the record at the start of its `eval`,
where they apply to the user's commands alone. (Until they are suspended,
a DEBUG trap still runs before the steps that read and clear the traps,
with its output in the shell's own, /dev/null.) ERR needs one thing more:
when the user's last command fails, `eval` fails too and would fire ERR a
second time, so the restored ERR trap skips exactly that one firing.

Nothing left running may write into a later command's output, so each command
gets an output FIFO of its own, with a random name that travels on the driver
line (like the token; the fields file is readable to a command) in a directory
a confined command cannot list. The server unlinks it as the command ends (its
record, read anyway, says so), so no path leads to it once its command is over
(`channels.py`).
"""

from __future__ import annotations

import hmac
import os
import re
import shlex
from collections.abc import Mapping

import msgspec

from bashrpc.server.runtime.seam.noterminal import PATH_FIRST

SNAPSHOT_ENV = "BASHRPC_SNAPSHOT"
# A sandboxed shell's stderr is bwrap's (`startlog.py`): its first act marks where
# bwrap's words end. A PTY's command puts its own stderr on the terminal then.
HAND_OVER_START_LOG = "\\builtin printf '\\0' >&2; \\exec"
# Replays the user's rc snapshot; its own output and errors are not the command's.
SOURCE_SNAPSHOT = f'\\command source "${SNAPSHOT_ENV}" >/dev/null 2>&1 </dev/null'
SUSPENDED_TRAPS = ("DEBUG", "ERR", "RETURN")
# `set -v` and `set -x`: off between commands, back at the start of the next one.
RESTORED_FLAGS = "vx"
RECORD_FIELDS = 6
# 128 bits, as hex: a record that does not carry the running command's is forged.
TOKEN_BYTES = 16
# Traps' code is the one field of any size; beyond this a record is junk.
MAX_RECORD_BYTES = 1024 * 1024
# The cwd and the command; the per-command variables follow.
FIXED_FIELDS = 2
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
    return f"{SOURCE_SNAPSHOT}\n{PATH_FIRST}\n\\command eval {reset} {shlex.quote(command)}"


def one_shot(command: str, prefix: str | None, snapshot: str | None) -> tuple[str, dict[str, str]]:
    """The `bash -c` text that runs `command` once as a session's shell would: after
    the configured prefix, with the rc snapshot (when there is one) replayed first;
    and the variables that text needs. A PTY's command and a job's shell text."""
    text = f"{prefix} {command}" if prefix else command
    if snapshot is None:
        return text, {}
    return after_snapshot(text), {SNAPSHOT_ENV: snapshot}


def bootstrap(status_path: str, fields_path: str, snapshot: bool) -> bytes:
    """Defines the driver; sent once, before the first command.

    bash reads a pipe one byte per system call, so what crosses the control
    pipe per command is as short as can be: the alias `__bashrpc_go`, whose
    text bash expands in memory and runs at the top level (as the user's
    `eval` must run, and as reading and clearing traps must). The command's
    fields travel in a file, read with one `mapfile`. The driver line puts
    the alias and alias expansion back after every command, so a user's
    `unalias -a` costs nothing.
    """
    # The rc's PATH replaces the server's: the editors' stand-ins go back in front.
    source = f"{SOURCE_SNAPSHOT}\n{PATH_FIRST}\n" if snapshot else ""
    return (
        f"""
{HAND_OVER_START_LOG} 2>/dev/null
set +o history 2>/dev/null
{source}__bashrpc_in={shlex.quote(fields_path)} __bashrpc_sfifo={shlex.quote(status_path)}
__bashrpc_dir={shlex.quote(os.path.dirname(fields_path))}
__bashrpc_line={shlex.quote(_line([]))}
__bashrpc_recv() {{
  \\builtin mapfile -d '' -n "$1" -t __bashrpc_f < "$__bashrpc_in" || return 1
  __bashrpc_cwd=${{__bashrpc_f[0]}} __bashrpc_cmd=${{__bashrpc_f[1]}}
  __bashrpc_env=("${{__bashrpc_f[@]:2}}")
}}
__bashrpc_cd() {{
  [[ -z $__bashrpc_cwd || $__bashrpc_cwd == "$PWD" ]] || \\command cd -- "$__bashrpc_cwd"
}}
__bashrpc_done() {{
  \\command printf '\\0%s\\0%s\\0%s\\0%s\\0%s\\0' "$1" "$PWD" "$__bashrpc_flags" "${{!-}}" "$2" \\
    >"$__bashrpc_sfifo"
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


def _line(env_names: list[str]) -> str:
    assigns = "".join(f'{name}="${{__bashrpc_env[{i}]}}" ' for i, name in enumerate(env_names))
    traps = " ".join(SUSPENDED_TRAPS)
    # Traps are read and cleared at the top level: a function would see none,
    # and what it cleared would come back when it returned.
    return (
        f"__bashrpc_recv {FIXED_FIELDS + len(env_names)} && "
        f"{{ __bashrpc_cd && {assigns}{_EVAL}; }} "
        '</dev/null >"$__bashrpc_dir/$__bashrpc_o" 2>&1; __bashrpc_status=$? __bashrpc_flags=$-; '
        # Nothing prints or records a line from here on, nor the next one as it is
        # read, with its token: -v and -x come back with the traps.
        "\\builtin set +vx +o history; "
        f'\\builtin trap -p {traps} >"$__bashrpc_sfifo"; \\builtin trap - {traps}; '
        # Put the alias back only if the user's command took it away.
        "[[ $BASHOPTS == *expand_aliases* && ${BASH_ALIASES[__bashrpc_go]-} ]] || "
        '{ \\builtin shopt -s expand_aliases; \\builtin alias __bashrpc_go="$__bashrpc_line"; }; '
        '__bashrpc_done "$__bashrpc_status"'
    )


def driver_line(token: str, output: str, env_names: list[str]) -> bytes:
    """What runs one command: the name of its output FIFO (in the shell's own
    directory), then the alias, or, with per-command variables (whose validated
    names are spliced in), the whole line; then the token, the last argument of
    `__bashrpc_done`."""
    run = _line(env_names) if env_names else "__bashrpc_go"
    return f"__bashrpc_o={output}; {run} {token}\n".encode()


def command_fields(*, cwd: str | None, prefix: str, command: str, env: Mapping[str, str]) -> bytes:
    """The fields file: the cwd, the command (on the line after the restore
    prefix, a line of its own), env values.

    It is rewritten in place, never truncated (that cost more than the rest
    of a command on ext4): the driver reads exactly as many fields as it wrote."""
    text = os.fsencode(prefix) + b"\n" + command.encode()
    fields = [os.fsencode(cwd or ""), text]
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
        if not self.traps and not any(map(self.flags.__contains__, RESTORED_FLAGS)):
            return ""
        lines = []
        for signal, code in parse_traps(self.traps).items():
            if signal == "ERR":
                if code != ERR_WRAPPER:
                    lines.append(f"__bashrpc_err={_quote_on_one_line(code)}")
                code = ERR_WRAPPER
            lines.append(f"\\builtin trap -- {_quote_on_one_line(code)} {signal}")
        lines += [f"\\builtin set -{flag}" for flag in RESTORED_FLAGS if flag in self.flags]
        return "; ".join(lines)


def _quote_on_one_line(text: str) -> str:
    """A shell word for `text` with no newline in it: the restore prefix is one line."""
    if "\n" not in text:
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"$'{escaped}'"


# How bash prints each trap (`trap -p`): `trap -- 'CODE' SIGNAL`, one a line,
# every `'` in CODE written `'\''` (close, an escaped quote, open again); a
# CODE that is one `'` alone is written `\'`.
_ESCAPED_QUOTE = "'\\''"
# Stands for an escaped quote while the lines are read: no record field holds a NUL.
_QUOTE_MARK = "\0"
_TRAP_LINE = re.compile(r"trap -- (?:\\'|'([^']*+)') (" + "|".join(SUSPENDED_TRAPS) + r")(?:\n|\Z)")


def parse_traps(text: str) -> dict[str, str]:
    """`trap -p` output of the suspended traps as {signal: code}; ValueError for
    anything bash does not print.

    The text is the command's (up to MAX_RECORD_BYTES) and is read on the event
    loop, so it is read in time linear in its size, in C (shlex took seconds for
    800 KB): with every escaped quote marked first, a quote is a word's edge."""
    if _QUOTE_MARK in text:
        raise ValueError("a NUL in trap -p output")
    marked = text.replace(_ESCAPED_QUOTE, _QUOTE_MARK)
    out: dict[str, str] = {}
    at = 0
    while at < len(marked):
        line = _TRAP_LINE.match(marked, at)
        if line is None:
            raise ValueError("not a trap line bash prints")
        code = line[1]
        out[line[2]] = "'" if code is None else code.replace(_QUOTE_MARK, "'")
        at = line.end()
    return out


class BadRecord(Exception):
    """The status FIFO carried what the driver never writes."""


class RecordReader:
    """Takes the running command's record from the status FIFO's bytes: each byte
    is scanned once, at most MAX_RECORD_BYTES are held, and anything but the one
    record that carries the expected token (junk, a forgery, a record when none
    is expected, bytes after it) is a BadRecord."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0
        self._ends: list[int] = []
        self._token: bytes | None = None

    def expect(self, token: str) -> None:
        """The next record must carry `token`."""
        self._token = token.encode()

    def feed(self, data: bytes) -> StatusRecord | None:
        if not data:
            return None
        if self._token is None:
            raise BadRecord("a record when no command runs")
        self._buf += data
        while len(self._ends) < RECORD_FIELDS:
            end = self._buf.find(b"\0", self._scanned)
            if end < 0:
                self._scanned = len(self._buf)
                break
            self._ends.append(end)
            self._scanned = end + 1
        if len(self._buf) > MAX_RECORD_BYTES:
            raise BadRecord("a record too large")
        if len(self._ends) < RECORD_FIELDS:
            return None
        if self._scanned != len(self._buf):
            raise BadRecord("bytes after the record")
        record = self._parse(self._token)
        self._buf, self._scanned, self._ends, self._token = bytearray(), 0, [], None
        return record

    def _parse(self, token: bytes) -> StatusRecord:
        # `feed` found exactly RECORD_FIELDS terminators and nothing after the last.
        traps, status, pwd, flags, last_job, theirs = bytes(self._buf[:-1]).split(b"\0")
        if not hmac.compare_digest(theirs, token):
            raise BadRecord("a record without the command's token")
        numbers = status.isdigit() and len(status) <= 3 and (last_job.isdigit() or not last_job)
        if not numbers or not (flags.isalpha() or not flags):
            raise BadRecord("a malformed record")
        text = traps.decode("utf-8", "surrogateescape")
        try:
            parse_traps(text)
        except ValueError:
            raise BadRecord("a malformed record") from None
        return StatusRecord(
            status=int(status),
            pwd=os.fsdecode(pwd),
            flags=flags.decode("ascii"),
            traps=text,
            last_job=int(last_job) if last_job else None,
        )
