import msgspec

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import BashStructured, CallToolResult
from bashrpc.server.output.sink import SinkSummary
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.tool.shaping import Shaping, shape


def outcome(
    text: str,
    *,
    exit_code: int | None = 0,
    truncated: bool = False,
    total_lines: int | None = None,
    artifact_id: int | None = None,
    timed_out: bool = False,
) -> Outcome:
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return Outcome(
        summary=SinkSummary(
            text=text,
            truncated=truncated,
            total_bytes=len(text) * (10 if truncated else 1),
            total_lines=total_lines if total_lines is not None else lines,
            output_bytes=len(text),
            output_lines=lines,
        ),
        exit_code=exit_code,
        cancelled=timed_out,
        timed_out=timed_out,
        timeout=5 if timed_out else None,
        working_dir="/",
        artifact_id=artifact_id,
    )


def body(result: CallToolResult) -> str:
    return result.text


def structured(result: CallToolResult) -> BashStructured:
    """A shaped result's structured content: shaping always gives one."""
    assert result.structured_content is not None
    return result.structured_content


SHAPING = Shaping(head=None, tail=None, max_bytes=51200)


def test_success() -> None:
    result = shape(outcome("ok\n"), SHAPING)
    assert body(result) == "ok\n" and not result.is_error
    assert structured(result).truncation is None and result.details is None


def test_missing_exit_status() -> None:
    result = shape(outcome("x\n", exit_code=None), SHAPING)
    assert result.is_error and body(result) == "x\n\nCommand failed: missing exit status"


def test_empty_output() -> None:
    assert body(shape(outcome(""), SHAPING)) == messages.NO_OUTPUT


def test_timeout_notice_comes_first_and_is_an_error() -> None:
    result = shape(outcome("part\n", exit_code=None, timed_out=True), SHAPING)
    assert result.is_error
    assert body(result) == messages.timed_out_notice(5) + "\npart\n"


def test_head_reaching_before_the_kept_tail_reads_the_prefix() -> None:
    kept = "".join(f"{i}\n" for i in range(901, 1001))  # the last 100 of 1000 lines
    prefix = "".join(f"{i}\n" for i in range(1, 200)) + "20"  # cut mid-line
    result = shape(
        outcome(kept, truncated=True, total_lines=1000, artifact_id=7, exit_code=1),
        Shaping(head=50, tail=10, max_bytes=51200),
        prefix,
    )
    t = structured(result).truncation
    # Head and tail chose lines 41-50; no cap cut them, so none is named.
    assert t is not None and t.truncated_by is None and t.artifact_id == 7
    assert (t.shown_range.start, t.shown_range.end) == (41, 50)
    assert t.output_lines == 10
    shown = "\n".join(str(i) for i in range(41, 51))
    notice = messages.TRUNCATION_NOTICE.format(
        start=41, end=50, total=1000, limit="", full=" Full: artifact://7"
    )
    assert body(result) == shown + notice + "\n\n" + messages.EXITED_WITH_CODE.format(code=1)
    assert result.details is not None and result.details.meta is not None


def test_head_without_the_prefix_shows_the_newest_lines_and_names_the_cap() -> None:
    kept = "".join(f"{i}\n" for i in range(901, 1001))
    result = shape(
        outcome(kept, truncated=True, total_lines=1000, artifact_id=7),
        Shaping(head=50, tail=10, max_bytes=51200),
    )
    t = structured(result).truncation
    assert t is not None and t.truncated_by == "bytes"
    assert (t.shown_range.start, t.shown_range.end) == (991, 1000)
    assert body(result).endswith(
        "[Showing lines 991-1000 of 1000 (50KB limit). Full: artifact://7]"
    )


def test_a_lifted_tail_within_the_caps_names_no_limit() -> None:
    text = "".join(f"{i}\n" for i in range(1, 3001))
    result = shape(outcome(text), Shaping(head=None, tail=5, max_bytes=51200, max_lines=2000))
    # The whole output was held and no artifact was made: the user's tail, no notice.
    assert body(result) == "2996\n2997\n2998\n2999\n3000\n"
    assert structured(result).truncation is None
    spilled = outcome(text[-100:], truncated=True, total_lines=3000, artifact_id=3)
    result = shape(spilled, Shaping(head=None, tail=5, max_bytes=100))
    assert body(result).endswith("3000\n\n\n[Showing lines 2996-3000 of 3000. Full: artifact://3]")


def test_line_cap_and_no_artifact() -> None:
    text = "".join(f"{i}\n" for i in range(1, 3001))
    result = shape(outcome(text), Shaping(head=None, tail=None, max_bytes=51200, max_lines=2000))
    t = structured(result).truncation
    assert t is not None and t.truncated_by == "lines" and t.artifact_id is None
    assert (t.shown_range.start, t.shown_range.end) == (1001, 3000)
    assert body(result).endswith("[Showing lines 1001-3000 of 3000 (2000 lines limit).]")


def test_clamp_notice_is_last() -> None:
    result = shape(
        outcome("a\n", exit_code=2),
        Shaping(head=None, tail=None, max_bytes=51200, clamp=(0.5, 1.0)),
    )
    assert body(result) == (
        "a\n\n"
        + messages.EXITED_WITH_CODE.format(code=2)
        + messages.TIMEOUT_CLAMPED.format(requested="0.5", applied="1")
    )


def test_the_shells_notices_follow_the_timeout_notice() -> None:
    restarted = msgspec.structs.replace(
        outcome("part\n", exit_code=None, timed_out=True),
        shell_restarted=True,
        cwd_fallback=("/tmp/gone", "/work/app"),
    )
    result = shape(restarted, SHAPING)
    fallback = messages.SHELL_CWD_GONE.format(cwd="/tmp/gone", workspace="/work/app")
    notices = f"{messages.timed_out_notice(5)}\n{fallback}\n{messages.SHELL_RESTARTED}\n"
    assert body(result) == notices + "part\n"
    assert structured(result).shell_restarted
    assert not structured(shape(outcome("ok\n"), SHAPING)).shell_restarted
