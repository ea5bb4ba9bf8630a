"""`exec --via LAUNCHER`: the server started through a byte-stream launcher
(`ssh -T host`, `podman exec -i box`, `kubectl exec -i pod --`), pure.

The launcher's words come first, then the server's command line. ssh joins
its arguments with spaces for the remote shell to parse again, so for ssh
the server's command line goes as one quoted string; every other launcher
execs its arguments as they are. A launcher that forces a terminal is
refused: on a terminal the line discipline breaks the protocol.
"""

from __future__ import annotations

import os
import re
import shlex

import msgspec

from bashrpc.protocol import messages

# The server's program on the far side: on its PATH there.
REMOTE_PROGRAM = "bashrpc"
# Launchers that hand one string to a remote shell, rather than an argv to exec.
SHELL_STRING_LAUNCHERS = frozenset({"ssh"})
# `-t`, `-tt`, `-it`: a cluster of short flags that holds `t`.
_SHORT_FLAGS = re.compile(r"-[A-Za-z]+")
_TTY_LONG_FLAGS = ("--tty", "--tty=true", "-t=true")


class LauncherError(ValueError):
    pass


class Launcher(msgspec.Struct, frozen=True):
    words: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Launcher:
        try:
            words = tuple(shlex.split(text))
        except ValueError as exc:
            raise LauncherError(messages.VIA_UNPARSABLE.format(reason=exc)) from None
        if not words or not words[0]:
            raise LauncherError(messages.VIA_EMPTY)
        for word in words[1:]:
            if word == "--":
                break
            if word in _TTY_LONG_FLAGS or (_SHORT_FLAGS.fullmatch(word) and "t" in word):
                raise LauncherError(messages.VIA_FORCES_TTY.format(flag=word))
        return cls(words)

    @property
    def joins_to_a_string(self) -> bool:
        return os.path.basename(self.words[0]) in SHELL_STRING_LAUNCHERS

    def argv(self, remote: list[str]) -> list[str]:
        """The local command line that runs `remote` (program and arguments) far away."""
        if self.joins_to_a_string:
            return [*self.words, shlex.join(remote)]
        return [*self.words, *remote]
