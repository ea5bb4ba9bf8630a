from protocol import messages
from server.output.sink import SinkSummary
from server.services.outcome import Outcome
from server.services.shaping import Shaping, shape


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


def body(result) -> str:  # type: ignore[no-untyped-def]
    return result.content[0].text


SHAPING = Shaping(head=None, tail=None, max_bytes=51200)


def test_success() -> None:
    result = shape(outcome("ok\n"), SHAPING)
    assert body(result) == "ok\n" and not result.is_error
    assert result.structured_content.truncation is None and result.details is None


def test_missing_exit_status() -> None:
    result = shape(outcome("x\n", exit_code=None), SHAPING)
    assert result.is_error and body(result) == "x\n\nCommand failed: missing exit status"


def test_empty_output() -> None:
    assert body(shape(outcome(""), SHAPING)) == messages.NO_OUTPUT


def test_timeout_notice_comes_first_and_is_an_error() -> None:
    result = shape(outcome("part\n", exit_code=None, timed_out=True), SHAPING)
    assert result.is_error
    assert body(result) == messages.timed_out_notice(5) + "\npart\n"


def test_truncated_range_follows_head_and_tail() -> None:
    kept = "".join(f"{i}\n" for i in range(901, 1001))  # the last 100 of 1000 lines
    result = shape(
        outcome(kept, truncated=True, total_lines=1000, artifact_id=7, exit_code=1),
        Shaping(head=50, tail=10, max_bytes=51200),
    )
    t = result.structured_content.truncation
    assert t is not None and t.truncated_by == "bytes" and t.artifact_id == 7
    assert (t.shown_range.start, t.shown_range.end) == (941, 950)
    assert t.output_lines == 10
    shown = "".join(f"{i}\n" for i in range(941, 951))
    notice = messages.TRUNCATION_NOTICE.format(
        start=941, end=950, total=1000, limit="50KB", full=" Full: artifact://7"
    )
    assert body(result) == shown + notice + "\n\n" + messages.EXITED_WITH_CODE.format(code=1)
    assert result.details is not None and result.details.meta is not None


def test_line_cap_and_no_artifact() -> None:
    text = "".join(f"{i}\n" for i in range(1, 3001))
    result = shape(outcome(text), Shaping(head=None, tail=None, max_bytes=51200, max_lines=2000))
    t = result.structured_content.truncation
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
