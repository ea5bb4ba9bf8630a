"""What a command prints, as the result carries it: sanitized, bounded, spilled, capped."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path

from bashrpc.protocol.methods import ArtifactReadParams, ArtifactReadResult, BashParams
from bashrpc.server.cli.printer import exact_bytes
from tests.conftest import SpawnInProcess
from tests.inprocess import InProcessServer

CAP = 1_000_000


def dir_sizes(directory: Path) -> tuple[int, int]:
    """(total, largest) of the artifact files right now."""
    sizes = []
    for path in directory.glob("*.bash.log"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:
            continue
    return sum(sizes), max(sizes, default=0)


def test_artifact_cap_holds_while_a_command_runs(spawn: SpawnInProcess) -> None:
    server = spawn(f"[artifacts]\nmaxTotalBytes = {CAP}\n")
    older = server.bash("seq 1 100000").artifact_id  # 588,895 bytes, finished
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(dir_sizes(server.artifacts_dir))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = server.bash("yes", timeout=2)
    finally:
        stop.set()
        watcher.join()
    assert result.timed_out and result.truncated
    assert result.artifact_truncated is True
    assert len(seen) > 50
    assert max(total for total, _ in seen) <= CAP
    assert dir_sizes(server.artifacts_dir)[0] <= CAP
    # The older artifact made room first; the runaway one was cut at the cap.
    assert not (server.artifacts_dir / f"{older}.bash.log").exists()
    runaway = server.artifacts_dir / f"{result.artifact_id}.bash.log"
    assert runaway.stat().st_size == CAP
    assert result.output.endswith("y\n")  # the tail in memory is as always


def test_per_artifact_limit(spawn: SpawnInProcess) -> None:
    server = spawn("[artifacts]\nmaxBytes = 100000\n")
    result = server.bash("seq 1 100000")
    assert result.artifact_truncated is True and result.total_bytes == 588895
    artifact = server.artifacts_dir / f"{result.artifact_id}.bash.log"
    assert artifact.stat().st_size == 100000
    small = server.bash("seq 1 20000")  # 108,894 bytes: over the limit too
    assert small.artifact_truncated is True
    fits = server.bash("seq 1 15000")  # 78,894 bytes: whole
    assert fits.truncated and not fits.artifact_truncated


def test_escape_sequences_split_across_reads_are_removed(server: InProcessServer) -> None:
    # An 8-bit CSI (U+009B in UTF-8) cut between its two bytes.
    split_csi = server.bash("printf '\\xc2'; sleep 0.2; printf '\\x9b31mred\\n'")
    assert split_csi.output == "red\n"
    # A 5 KiB window title cut before its terminator.
    title = server.bash(
        "printf '\\033]0;%s' \"$(head -c 5000 /dev/zero | tr '\\0' t)\"; sleep 0.2;"
        " printf '\\a'; echo after"
    )
    assert title.output == "after\n"


def test_a_dropped_sequence_never_leaves_a_c1_control_behind(server: InProcessServer) -> None:
    """A stray 0xC2, a colour, a stray 0x9B: with the colour dropped, the two
    bytes would read as an 8-bit CSI in the result and in the chunks."""
    ident = server.request("bash", BashParams(command="printf '\\xc2\\033[31m\\x9b31mred\\n'"))
    result = server.bash_result(ident)
    chunks = "".join(chunk.text for chunk in server.chunks_for(ident))
    for text in (result.output, chunks):
        assert not any("\x80" <= char <= "\x9f" for char in text), ascii(text)
        assert text.endswith("31mred\n")


def test_inline_images_do_not_flood_the_output(server: InProcessServer) -> None:
    image = "$(head -c 300000 /dev/urandom | base64 -w0)"
    iterm = server.bash(f"printf '\\033]1337;File=inline=1:%s\\a' \"{image}\"; echo after")
    assert iterm.output == "after\n"
    chunk = "$(head -c 3000 /dev/urandom | base64 -w0)"
    kitty = server.bash(
        f"for i in 1 2 3; do printf '\\033_Gf=100,m=1;%s\\033\\\\' \"{chunk}\"; done; echo after"
    )
    assert kitty.output == "after\n"


def test_output_that_is_not_utf8_is_exact_in_base64_beside_its_text(
    server: InProcessServer,
) -> None:
    """The JSON text keeps U+FFFD; `textBase64` and the artifact keep the bytes."""
    raw = b"".join(b"%05d \xff\xfe \xe2\x82 \x80\n" for i in range(8000))
    data = server.tmp / "data.bin"
    data.write_bytes(raw)
    ident = server.request("bash", BashParams(command=f"cat {data}"))
    result = server.bash_result(ident)
    assert result.truncated and result.artifact_id is not None
    chunks = server.chunks_for(ident)
    streamed = b"".join(exact_bytes(c.text, c.text_base64) for c in chunks)
    assert streamed == raw
    assert "\ufffd" in chunks[0].text and chunks[0].text_base64 is not None
    assert "\ufffd" in result.output
    artifact = (server.artifacts_dir / f"{result.artifact_id}.bash.log").read_bytes()
    assert artifact == raw
    read = server.typed(
        ArtifactReadResult, "artifact/read", ArtifactReadParams(id=result.artifact_id, limit=100)
    )
    assert read.text_base64 is not None
    assert base64.b64decode(read.text_base64) == raw[: len(base64.b64decode(read.text_base64))]
