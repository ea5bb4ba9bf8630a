"""The bash text that captures the user's rc (pure): what it sources, and what
of the shell it dumps, and what it leaves out."""

from __future__ import annotations

import os

from bashrpc.server.runtime.seam.noterminal import EDITORS

COMPLETE_MARKER = "# bashrpc snapshot complete"

# Names that agent commands rely on behaving as documented: functions and
# aliases by these names are not carried over.
SHADOWED_TOOLS = [
    "ls",
    "cat",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "fd",
    "sed",
    "awk",
    "gawk",
    "rm",
    "cp",
    "mv",
    "ln",
    "mkdir",
    "rmdir",
    "touch",
    "chmod",
    "chown",
    "head",
    "tail",
    "less",
    "more",
    "sort",
    "uniq",
    "wc",
    "cut",
    "tr",
    "tee",
    "xargs",
    "diff",
    "patch",
    "tar",
    "curl",
    "wget",
    "git",
    "make",
    "python",
    "python3",
    "pip",
    "pip3",
    "node",
    "npm",
    "npx",
    "cd",
    "echo",
    "printf",
    "test",
    "read",
    "eval",
    "source",
    "exec",
    "command",
    "builtin",
    "type",
    "which",
    "env",
    "kill",
    "wait",
    "trap",
    "set",
    "shopt",
    "alias",
    "unalias",
    "declare",
    "export",
    "unset",
    "local",
    "return",
    "exit",
    # An editor's stand-in fails clearly where there is no terminal: an alias
    # or function by its name would reach the real editor, which waits.
    *EDITORS,
]
# `set -o` options that would break or pollute non-interactive command runs.
UNCARRIED_OPTIONS = [
    "errexit",
    "noexec",
    "onecmd",
    "xtrace",
    "verbose",
    "monitor",
    "history",
    "emacs",
    "vi",
    "posix",
    "interactive-comments",
    "hashall",
    "braceexpand",
]


def rc_file(shell: str) -> str:
    name = os.path.basename(shell)
    if name == "bash":
        return "~/.bashrc"
    if name == "zsh":
        return "~/.zshrc"
    return "~/.profile"


def capture_script(shell: str, out_fd: int) -> str:
    """A bash script: trap the dump on EXIT (so `exit` in the rc still dumps), then source.
    The dump goes to `out_fd`, the server's pipe."""
    skip = "|".join(SHADOWED_TOOLS)
    options = "|".join(UNCARRIED_OPTIONS)
    return f"""
__bashrpc_dump() {{
  # Read the options first: the rc may have set -e/-u, which the dump turns off.
  local __opts __n __o __s
  __opts=$(set -o)
  set +e +u
  {{
    for __n in $(compgen -A function); do
      if [[ $__n == _* || $__n =~ ^({skip})$ ]]; then continue; fi
      declare -f -- "$__n"
    done
    for __n in $(compgen -a); do
      if [[ $__n =~ ^({skip})$ ]]; then continue; fi
      alias -- "$__n"
    done
    while IFS= read -r __o; do
      case $__o in *" login_shell"|*" restricted_shell") ;; *) printf '%s\\n' "$__o";; esac
    done <<< "$(shopt -p)"
    while read -r __o __s; do
      if [[ $__s == on && ! $__o =~ ^({options})$ ]]; then printf 'set -o %s\\n' "$__o"; fi
    done <<< "$__opts"
    printf 'export PATH=%q\\n' "$PATH"
    printf 'shopt -s expand_aliases\\n'
    printf '%s\\n' '{COMPLETE_MARKER}'
  }} >&{out_fd}
}}
trap '__bashrpc_dump' EXIT
source {rc_file(shell)}
"""
