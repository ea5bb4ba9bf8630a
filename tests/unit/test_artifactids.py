"""Artifact ids never repeat within a workspace: across deletions, restarts and
servers allocating at the same moment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bashrpc.server.output import artifactids
from bashrpc.server.output.artifacts import ArtifactStore

WORKSPACE = "/work/project"
ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
IDS_EACH = 150
# Each process allocates ids and deletes each artifact at once, as eviction would,
# so no file is left for O_EXCL to collide with: only the counter keeps ids apart.
ALLOCATE = """
import os, sys
from pathlib import Path
from bashrpc.server.output.artifacts import ArtifactStore
store = ArtifactStore(Path(sys.argv[1]), sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
for _ in range(int(sys.argv[3])):
    writer = store.create()
    artifact_id = writer.close()
    store.remove(artifact_id)
    print(artifact_id, flush=True)
"""


def make(store: ArtifactStore) -> int:
    writer = store.create()
    assert writer is not None
    artifact_id = writer.close()
    assert artifact_id is not None
    return artifact_id


def test_ids_go_on_after_every_artifact_was_deleted(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    issued = [make(store) for _ in range(3)]
    for artifact_id in issued:
        store.remove(artifact_id)
    assert store.ids() == []
    assert make(ArtifactStore(tmp_path, WORKSPACE)) == 4
    # The counter is private, and no scan takes it for an artifact.
    counter = store.directory / artifactids.COUNTER_NAME
    assert os.stat(counter).st_mode & 0o777 == 0o600
    assert store.sizes() == [(4, 0)]


def test_the_higher_of_the_counter_and_the_files_wins(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    make(store)
    counter = store.directory / artifactids.COUNTER_NAME
    # Files from a version without the counter, and a counter that is junk or behind.
    for name in ("7.bash.log", "8.bash.log"):
        (store.directory / name).write_bytes(b"")
    counter.write_text("junk")
    assert make(ArtifactStore(tmp_path, WORKSPACE)) == 9
    counter.write_text("2\n")
    assert make(ArtifactStore(tmp_path, WORKSPACE)) == 10
    # A file another writer made after this store looked is stepped over.
    (store.directory / "11.bash.log").write_bytes(b"")
    assert make(store) == 12
    assert counter.read_text() == "13\n"


def test_a_planted_counter_gives_no_artifact_and_no_hang(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, WORKSPACE)
    make(store)
    counter = store.directory / artifactids.COUNTER_NAME
    counter.unlink()
    os.symlink(tmp_path / "elsewhere", counter)
    assert store.create() is None
    assert not (tmp_path / "elsewhere").exists()
    counter.unlink()
    os.mkfifo(counter)
    assert store.create() is None


def test_servers_allocating_at_once_never_share_an_id(tmp_path: Path) -> None:
    make(ArtifactStore(tmp_path, WORKSPACE))
    args = [sys.executable, "-c", ALLOCATE, str(tmp_path), WORKSPACE, str(IDS_EACH)]
    procs = [
        subprocess.Popen(args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(PROCESSES)
    ]
    # Let go together once all have imported, so their allocations overlap.
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    ids = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        ids += [int(line) for line in out.split()]
    assert len(ids) == PROCESSES * IDS_EACH
    assert sorted(ids) == list(range(2, 2 + PROCESSES * IDS_EACH))
