"""The pass over /proc that the thorough looks of kills share.

Sixty shells closed together beside a thousand processes, on a loaded machine,
took 12 to 16 s and 4 s of CPU: each look took longer than the sharing's window,
so each made a pass of its own. The looks of one turn of the loop now share it
however long the turn takes; a look in a later turn past the window reads anew.
"""

from __future__ import annotations

import time

import anyio

from bashrpc.server.runtime.containment.procs import Scan
from bashrpc.server.runtime.containment.registry import Containment
from bashrpc.server.runtime.containment.trackers import SHARED_SCAN_SECONDS

# Longer than the window: what a loaded machine makes of a few looks.
SLOW_LOOK_SECONDS = 2 * SHARED_SCAN_SECONDS


def test_the_looks_of_one_turn_share_one_pass_however_slow() -> None:
    async def main() -> tuple[Scan, Scan]:
        containment = Containment(None)
        first = containment.shared_scan()
        time.sleep(SLOW_LOOK_SECONDS)  # the loop does not turn meanwhile
        return first, containment.shared_scan()

    first, second = anyio.run(main)
    assert second is first


def test_a_later_turn_past_the_window_reads_proc_anew() -> None:
    async def main() -> tuple[Scan, Scan, Scan]:
        containment = Containment(None)
        first = containment.shared_scan()
        await anyio.sleep(SLOW_LOOK_SECONDS)
        second = containment.shared_scan()
        return first, second, containment.shared_scan()

    first, second, third = anyio.run(main)
    assert second is not first
    # The new pass is the new turn's to share.
    assert third is second
