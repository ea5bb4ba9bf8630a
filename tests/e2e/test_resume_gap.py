"""A resume from before what is kept fails loudly (-32009, naming the first seq
kept), unless the request accepts the gap: then the first chunk says so."""

from __future__ import annotations

import msgspec
import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.errors import ErrorCode, ResumeGapData
from bashrpc.protocol.methods import (
    BashAttachParams,
    BashParams,
    BashResult,
    ServerStatsParams,
    ServerStatsResult,
)
from tests.daemon import DaemonProcess, introduce
from tests.rpc import error_of, wait_until

pytestmark = pytest.mark.slow

HANG_SECONDS = 120.0
# More than a cut request's replay ring keeps (32 MiB).
FLOOD = "head -c 60000000 /dev/zero | tr '\\0' a; echo"


def test_a_resume_past_what_is_kept_is_refused_unless_the_gap_is_accepted(
    daemon: DaemonProcess,
) -> None:
    first = introduce(daemon.connect(), "gapper")
    ident = first.request("bash", BashParams(command=FLOOD))
    first.receive_until(lambda: len(first.chunks_for(ident)) >= 2, HANG_SECONDS)
    first.cut()

    second = introduce(daemon.connect(), "gapper")

    def finished() -> bool:
        [session] = second.sessions().values()
        return [r.state for r in session.requests or []] == ["finished"]

    assert wait_until(finished, timeout=HANG_SECONDS)
    refused = error_of(second.call("bash/attach", BashAttachParams(request_id=ident)))
    assert refused.code == ErrorCode.RESUME_GAP
    gap = msgspec.convert(refused.data, ResumeGapData)
    assert gap.first_kept > 0 and gap.missed == gap.first_kept
    assert f"the first kept is {gap.first_kept}" in refused.message

    attach = second.request("bash/attach", BashAttachParams(request_id=ident, accept_gap=True))
    result = second.bash_result(attach, timeout=HANG_SECONDS)
    assert isinstance(result, BashResult) and result.exit_code == 0
    chunks = second.chunks_for(ident)
    assert chunks[0].seq == gap.first_kept
    notice = messages.NOTICE_RESUME_MISSED.format(count=gap.missed)
    assert chunks[0].text.startswith(notice)

    stats = second.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    assert stats.resumes.gap == 2 and stats.resumes.ok == 0
    second.close()


def test_a_resume_from_what_is_kept_is_exact_and_counted_ok(daemon: DaemonProcess) -> None:
    first = introduce(daemon.connect(), "keeper")
    ident = first.request("bash", BashParams(command="seq 1 1000; sleep 1; seq 1001 2000"))
    first.receive_until(lambda: len(first.chunks_for(ident)) >= 1, HANG_SECONDS)
    seen = first.chunks_for(ident)[-1].seq
    first.cut()
    second = introduce(daemon.connect(), "keeper")
    attach = second.request("bash/attach", BashAttachParams(request_id=ident, after_seq=seen))
    second.bash_result(attach, timeout=HANG_SECONDS)
    assert second.chunks_for(ident)[0].seq == seen + 1
    stats = second.typed(ServerStatsResult, "server/stats", ServerStatsParams())
    assert (stats.resumes.ok, stats.resumes.gap) == (1, 0)
    second.close()
