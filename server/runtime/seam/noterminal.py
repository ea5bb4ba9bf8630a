"""Where editors started without a terminal fail at once: the folder of
stand-ins (`noterminal/`, a POSIX shell script under each editor's name) put
first on a command's PATH, and the program the editor variables name.

The folder is package data inside the installed tree, which every sandbox
mode binds read-only, so a confined command finds it too."""

from __future__ import annotations

import os
import shlex

# The folder next to this module; the shell puts it first on PATH.
FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "noterminal")
# What EDITOR, VISUAL and the like name: fails where there is no terminal and
# runs the system's `editor` where there is one.
EDITOR = os.path.join(FOLDER, "editor")
# The programs it stands in for (besides `editor`).
EDITORS = ("vim", "vi", "view", "vimdiff", "nvim", "nano", "pico", "emacs")
# The variables programs read for the editor they run.
EDITOR_VARIABLES = (
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "SUDO_EDITOR",
    "SVN_EDITOR",
    "HGEDITOR",
    "KUBE_EDITOR",
    "FCEDIT",
)


def first_on_path(path: str) -> str:
    """`path` with the folder first (and nowhere else)."""
    rest = [part for part in path.split(os.pathsep) if part and part != FOLDER]
    return os.pathsep.join([FOLDER, *rest])


# Shell text that puts the folder first on PATH unless it is there: run after the
# rc snapshot, whose PATH is the rc's.
_QUOTED = shlex.quote(FOLDER)
PATH_FIRST = f"[[ :$PATH: == *:{_QUOTED}:* ]] || PATH={_QUOTED}:$PATH"
