import os
import stat
from pathlib import Path
from typing import cast

import pytest

from bashrpc.server.errors import ArtifactNotFound
from bashrpc.server.output.artifactroot import workspace_key
from bashrpc.server.output.artifacts import ArtifactStore

WORKSPACE = "/work/project"


def make(store: ArtifactStore, data: bytes) -> int:
    writer = store.create()
    assert writer is not None
    writer.write(data)
    artifact_id = writer.close()
    assert artifact_id is not None
    return artifact_id


def test_ids_are_sequential_and_modes_private(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a", WORKSPACE)
    assert [make(store, b"x"), make(store, b"y")] == [1, 2]
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    assert store.directory == tmp_path / "a" / workspace_key(WORKSPACE)
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path(1)).st_mode) == 0o600
    # A new store continues after the highest id on disk.
    assert make(ArtifactStore(tmp_path / "a", WORKSPACE), b"z") == 3


def test_reads_page_through_on_character_boundaries(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    text = "a€b𝄞c" * 50
    artifact_id = make(store, text.encode())
    pieces, offset = [], 0
    while True:
        chunk = store.read(artifact_id, offset, 7)
        assert chunk.offset == offset
        pieces.append(chunk.data.decode())  # never splits a character
        if chunk.next_offset is None:
            break
        offset = chunk.next_offset
    assert "".join(pieces) == text


def test_read_from_mid_character_moves_to_next_boundary(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    artifact_id = make(store, "€x".encode())
    chunk = store.read(artifact_id, 1, 100)
    assert chunk.data == b"x" and chunk.offset == 3 and chunk.next_offset is None


def test_limit_smaller_than_a_character_still_progresses(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    artifact_id = make(store, "€€".encode())
    chunk = store.read(artifact_id, 0, 1)
    assert chunk.data == "€".encode() and chunk.next_offset == 3


def test_unknown_id_lists_available(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    make(store, b"x")
    with pytest.raises(ArtifactNotFound) as info:
        store.read(99, 0, 10)
    assert info.value.available == [1]


def test_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "a", WORKSPACE)
    make(store, b"x")
    secret = tmp_path / "secret"
    secret.write_text("top secret")
    os.symlink(secret, store.path(5))
    with pytest.raises(ArtifactNotFound):
        store.read(5, 0, 100)


def test_retention_deletes_oldest_first(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE, max_total_bytes=250)
    for _ in range(5):
        make(store, b"x" * 100)
    assert store.ids() == [4, 5]


def test_unwritable_directory_gives_no_artifact(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ArtifactStore(blocker / "sub", WORKSPACE)
    assert store.create() is None


def dir_total(store: ArtifactStore) -> int:
    return sum(size for _, size in store.sizes())


def test_the_total_cap_holds_while_writing(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE, max_total_bytes=1000)
    old = make(store, b"o" * 600)
    writer = store.create()
    assert writer is not None
    for _ in range(40):
        writer.write(b"y" * 300_000)  # big writes go straight to the file
        assert dir_total(store) <= 1000
    assert writer.cut
    assert writer.close() == writer.id
    # The older artifact made room; the new one stopped exactly at the cap.
    assert not store.path(old).exists()
    assert store.path(writer.id).stat().st_size == 1000


def test_an_artifact_still_being_written_is_never_deleted(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE, max_total_bytes=1000)
    first = store.create()
    second = store.create()
    assert first is not None and second is not None
    first.write(b"a" * 300_000)
    second.write(b"b" * 300_000)
    assert first.size == 1000 and second.size == 0 and second.cut
    assert first.close() == first.id and second.close() == second.id


def test_the_per_artifact_cap(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE, max_bytes=100)
    writer = store.create()
    assert writer is not None
    writer.write(b"z" * 150)
    assert writer.close() == writer.id and writer.cut
    assert store.path(writer.id).stat().st_size == 100
    whole = store.create()
    assert whole is not None
    whole.write(b"z" * 100)
    assert whole.close() == whole.id and not whole.cut


def test_workspace_keys_are_readable_stable_and_distinct() -> None:
    key = workspace_key("/home/me/my project")
    assert key.startswith("my_project-") and key == workspace_key("/home/me/my project/")
    assert workspace_key("/a/app") != workspace_key("/b/app")
    assert workspace_key("/").startswith("root-")
    assert workspace_key("/x/..").startswith("root-")


def test_workspaces_sharing_a_root_see_only_their_own(tmp_path: Path) -> None:
    mine = ArtifactStore(tmp_path, "/work/mine")
    theirs = ArtifactStore(tmp_path, "/work/theirs")
    assert make(mine, b"m") == 1 and make(theirs, b"t") == 1 and make(theirs, b"u") == 2
    assert mine.ids() == [1] and theirs.ids() == [1, 2]
    assert mine.read(1, 0, 10).data == b"m"
    with pytest.raises(ArtifactNotFound) as info:
        mine.read(2, 0, 10)
    assert info.value.available == [1]


def test_the_total_cap_spans_every_workspace_and_old_flat_files(tmp_path: Path) -> None:
    (tmp_path / "7.bash.log").write_bytes(b"f" * 100)  # left by a flat-directory version
    theirs = ArtifactStore(tmp_path, "/work/theirs", max_total_bytes=250)
    old = make(theirs, b"t" * 100)
    mine = ArtifactStore(tmp_path, "/work/mine", max_total_bytes=250)
    make(mine, b"m" * 100)
    assert not (tmp_path / "7.bash.log").exists()
    make(mine, b"n" * 100)
    assert not theirs.path(old).exists() and mine.ids() == [1, 2]


def test_gathered_pieces_are_written_in_order_and_cut_exactly_at_the_cap(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE, max_bytes=100_000)
    writer = store.create()
    assert writer is not None
    # Small pieces are gathered, big ones too, and a bytearray changed after its
    # write must not change what the file holds.
    pieces = [bytes([65 + i % 26]) * (7 + i * 13 % 500) for i in range(400)]
    reused = bytearray(b"!" * 10)
    sent = b""
    for index, piece in enumerate(pieces):
        writer.write(piece)
        sent += piece
        if index == 5:
            # The type says bytes; a buffer its caller goes on to reuse must be safe too.
            writer.write(cast(bytes, reused))
            sent += bytes(reused)
            reused[:] = b"?" * 10
    assert writer.close() == writer.id and writer.cut
    assert store.path(writer.id).read_bytes() == sent[:100_000]


def test_an_owners_directory_is_beside_its_workspaces_and_its_own(tmp_path: Path) -> None:
    workspace = ArtifactStore(tmp_path, WORKSPACE)
    alice = ArtifactStore(tmp_path, WORKSPACE, owner="client:alice")
    bob = ArtifactStore(tmp_path, WORKSPACE, owner="client:bob")
    assert alice.directory.parent == tmp_path
    assert alice.directory.name.startswith(workspace.directory.name + ".client_alice-")
    assert len({workspace.directory, alice.directory, bob.directory}) == 3
    # Each owner counts its own ids, and clears only its own.
    assert [make(alice, b"a"), make(bob, b"b")] == [1, 1]
    assert alice.clear() == 1
    assert alice.ids() == [] and bob.ids() == [1]


def test_one_still_written_when_cleared_goes_once_finished(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    writer = store.create()
    assert writer is not None
    writer.write(b"the last task's")
    assert store.clear() == 0
    assert store.ids() == [writer.id]
    writer.close()
    assert store.ids() == []
