from bashrpc.server.runtime.run import env


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
    assert built["CI"] == "1" and built["EDITOR"] == "true"
    assert built["X"] == "1" and built["AWS_PAGER"] == ""


def test_without_guards_drops_only_guard_keys() -> None:
    assert env.without_guards({"EDITOR": "vim", "A": "b"}) == {"A": "b"}
    assert env.without_guards(None) == {}


def test_excluding_drops_matching_server_variables() -> None:
    inherited = {"GITHUB_TOKEN": "t", "AWS_SECRET_KEY": "s", "API_KEY": "k", "HOME": "/h"}
    kept = env.excluding(inherited, ["*TOKEN*", "*SECRET*", "*_KEY"])
    assert kept == {"HOME": "/h"}
    assert env.excluding(inherited, []) == inherited
