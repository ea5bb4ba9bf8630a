"""`exec --via`: how a launcher's words and the server's command line combine."""

from __future__ import annotations

import shlex

import pytest

from bashrpc.server.cli.launcher import Launcher, LauncherError

REMOTE = ["bashrpc", "--workspace", "my dir", "--log-level", "WARNING"]


def test_ssh_gets_the_server_command_as_one_quoted_string() -> None:
    argv = Launcher.parse("ssh -T -oConnectTimeout=5 user@host").argv(REMOTE)
    assert argv[:-1] == ["ssh", "-T", "-oConnectTimeout=5", "user@host"]
    assert shlex.split(argv[-1]) == REMOTE


def test_other_launchers_get_the_argv_as_is() -> None:
    argv = Launcher.parse("podman exec -i box").argv(REMOTE)
    assert argv == ["podman", "exec", "-i", "box", *REMOTE]
    argv = Launcher.parse("/usr/bin/kubectl exec -i pod -c agent --").argv(REMOTE)
    assert argv[-len(REMOTE) - 1 :] == ["--", *REMOTE]


@pytest.mark.parametrize(
    "text", ["ssh -t host", "ssh -tt host", "docker exec -it box", "kubectl exec --tty pod"]
)
def test_a_launcher_that_forces_a_terminal_is_refused(text: str) -> None:
    with pytest.raises(LauncherError, match="forces a terminal"):
        Launcher.parse(text)


def test_words_after_a_double_dash_are_the_launchers_command() -> None:
    assert Launcher.parse("kubectl exec -i pod -- env -t").words[-1] == "-t"


@pytest.mark.parametrize("text", ["", "   ", "ssh 'unclosed"])
def test_an_unusable_launcher_is_refused(text: str) -> None:
    with pytest.raises(LauncherError):
        Launcher.parse(text)
