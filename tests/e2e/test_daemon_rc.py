"""The user's rc under the daemon, where each tenant captures its own.

A capture is the rc's own CPU work, and an rc may take a lock (pyenv's rehash
does, for each run): many tenants' captures at once waited on each other past
the bound a tenant's end gives its capture, and the hang-up that followed could
land between pyenv taking its lock and setting the trap that frees it, leaving
the user's every later shell to wait 60 s for it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tests.daemon import SocketClient
from tests.e2e.conftest import SpawnDaemon

# Generous: only a hang could take this long.
HANG_SECONDS = 60.0
# Each capture takes at least this long, so captures run at once overlap.
CAPTURE_SECONDS = 0.4


def most_at_once(log: str) -> int:
    """The most captures running at one time, from their start and end lines."""
    events = []
    for line in log.splitlines():
        edge, _pid, at = line.split()
        events.append((float(at), 1 if edge == "start" else -1))
    running = most = 0
    # At one instant, an end before a start.
    for _, step in sorted(events):
        running += step
        most = max(most, running)
    return most


def test_tenants_capture_the_rc_no_more_at_once_than_the_machine_has_cpus(
    spawn_daemon: SpawnDaemon, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    log = tmp_path / "captures"
    (home / ".bashrc").write_text(
        f'echo "start $$ $(date +%s.%N)" >> {log}\n'
        f"sleep {CAPTURE_SECONDS}\n"
        f'echo "end $$ $(date +%s.%N)" >> {log}\n'
    )
    cpus = len(os.sched_getaffinity(0))
    daemon = spawn_daemon()
    # A connection that names no clientId is a tenant of its own, with its own capture.
    clients: list[SocketClient] = [daemon.connect() for _ in range(cpus + 2)]
    answers: list[int | None] = []

    def first_command(client: SocketClient) -> None:
        answers.append(client.bash("echo hi", wait=HANG_SECONDS).exit_code)

    threads = [threading.Thread(target=first_command, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_SECONDS)
    for client in clients:
        client.close()
    assert answers == [0] * len(clients)
    text = log.read_text()
    assert text.count("end ") == len(clients)
    assert most_at_once(text) <= cpus
