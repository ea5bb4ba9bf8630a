"""What a command prints, as the result carries it: sanitized, bounded, spilled, capped."""

from __future__ import annotations

from tests.rpc import ServerProcess


def test_escape_sequences_split_across_reads_are_removed(server: ServerProcess) -> None:
    # An 8-bit CSI (U+009B in UTF-8) cut between its two bytes.
    split_csi = server.bash("printf '\\xc2'; sleep 0.2; printf '\\x9b31mred\\n'")
    assert split_csi["output"] == "red\n"
    # A 5 KiB window title cut before its terminator.
    title = server.bash(
        "printf '\\033]0;%s' \"$(head -c 5000 /dev/zero | tr '\\0' t)\"; sleep 0.2;"
        " printf '\\a'; echo after"
    )
    assert title["output"] == "after\n"


def test_inline_images_do_not_flood_the_output(server: ServerProcess) -> None:
    image = "$(head -c 300000 /dev/urandom | base64 -w0)"
    iterm = server.bash(f"printf '\\033]1337;File=inline=1:%s\\a' \"{image}\"; echo after")
    assert iterm["output"] == "after\n"
    chunk = "$(head -c 3000 /dev/urandom | base64 -w0)"
    kitty = server.bash(
        f"for i in 1 2 3; do printf '\\033_Gf=100,m=1;%s\\033\\\\' \"{chunk}\"; done; echo after"
    )
    assert kitty["output"] == "after\n"
