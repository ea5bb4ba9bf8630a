import os
import subprocess

from bashrpc.protocol import messages
from bashrpc.server.runtime.run import env
from bashrpc.server.runtime.seam import noterminal


def test_layers_defaults_then_overlays_then_guards() -> None:
    built = env.build(
        {"TERM": "xterm", "HOME": "/h", "EDITOR": "vim"},
        {"PAGER": "less", "GIT_ASKPASS": "/bin/ask"},
        {"CI": "0", "X": "1"},
    )
    assert built["HOME"] == "/h"
    assert built["TERM"] == "dumb"  # a default beats the inherited value
    assert built["PAGER"] == "less"  # a caller value beats a default
    assert built["GIT_ASKPASS"] == "false"  # guards beat everyone
    assert built["CI"] == "1" and built["EDITOR"] == noterminal.EDITOR
    assert built["X"] == "1" and built["AWS_PAGER"] == ""


def test_without_guards_drops_only_guard_keys() -> None:
    assert env.without_guards({"EDITOR": "vim", "A": "b"}) == {"A": "b"}
    assert env.without_guards(None) == {}


def test_excluding_drops_matching_server_variables() -> None:
    inherited = {"GITHUB_TOKEN": "t", "AWS_SECRET_KEY": "s", "API_KEY": "k", "HOME": "/h"}
    kept = env.excluding(inherited, ["*TOKEN*", "*SECRET*", "*_KEY"])
    assert kept == {"HOME": "/h"}
    assert env.excluding(inherited, []) == inherited


def test_the_editors_stand_ins_come_first_on_path() -> None:
    built = env.build({"PATH": f"/usr/bin:{noterminal.FOLDER}"}, {"PATH": "/opt/bin:/usr/bin"})
    assert built["PATH"] == f"{noterminal.FOLDER}:/opt/bin:/usr/bin"
    terminal = env.for_terminal(built, {})
    assert not set(noterminal.EDITOR_VARIABLES) & set(terminal)


def test_each_stand_in_says_the_message_and_fails() -> None:
    names = sorted(os.listdir(noterminal.FOLDER))
    assert names == sorted(["editor", *noterminal.EDITORS])
    for name in names:
        done = subprocess.run(
            [os.path.join(noterminal.FOLDER, name), "f"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == messages.NO_TERMINAL.format(program=name) + "\n"
