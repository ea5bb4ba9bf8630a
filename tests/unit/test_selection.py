from bashrpc.server.output.sink import SinkSummary, count_lines
from bashrpc.server.services.tool.selection import Selection, select

TEN = "".join(f"{i}\n" for i in range(1, 11))


def whole(text: str) -> SinkSummary:
    n = count_lines(text)
    return SinkSummary(text, False, len(text), n, len(text), n)


def tail_of(text: str, keep: int) -> SinkSummary:
    kept = text[-keep:]
    return SinkSummary(kept, True, len(text), count_lines(text), len(kept), count_lines(kept))


def test_head_and_tail_select_from_the_whole_output() -> None:
    assert select(whole(TEN), 5, None, 2000) == Selection("1\n2\n3\n4\n5", 1, 5, None)
    assert select(whole(TEN), None, 3, 2000) == Selection("8\n9\n10\n", 8, 10, None)
    # head first: the first 6 lines, then the last 2 of those.
    assert select(whole(TEN), 6, 2, 2000) == Selection("5\n6", 5, 6, None)
    assert select(whole(TEN), None, None, 2000) == Selection(TEN, 1, 10, None)
    assert select(whole(TEN), 50, 50, 2000) == Selection(TEN, 1, 10, None)


def test_no_newline_is_added_that_the_output_lacked() -> None:
    five = "line1\nline2\nline3\nline4\nline5"
    assert select(whole(five), 2, None, 2000).text == "line1\nline2"
    assert select(whole(five), None, 2, 2000).text == "line4\nline5"
    assert select(whole(five + "\n"), None, 2, 2000).text == "line4\nline5\n"
    assert select(whole("a\nb"), None, 1, 2000) == Selection("b", 2, 2, None)


def test_empty_output() -> None:
    assert select(whole(""), 3, 3, 2000) == Selection("", 1, 0, None)
    assert select(whole(""), None, None, 2000).text == ""


def test_the_line_cap_cuts_what_was_selected_and_is_named() -> None:
    assert select(whole(TEN), None, None, 4) == Selection("7\n8\n9\n10\n", 7, 10, "lines")
    assert select(whole(TEN), 6, None, 4) == Selection("3\n4\n5\n6", 3, 6, "lines")
    assert select(whole(TEN), None, 3, 4).cut_by is None


def test_the_byte_cap_is_named_only_when_the_selection_was_not_held() -> None:
    summary = tail_of(TEN, 7)  # "8\n9\n10\n": lines 8-10 held
    assert select(summary, None, 2, 2000) == Selection("9\n10\n", 9, 10, None)
    # The first held line may be the end of a longer one: showing it counts as cut.
    assert select(summary, None, 3, 2000) == Selection("8\n9\n10\n", 8, 10, "bytes")
    assert select(tail_of("x" * 50 + "\n", 10), None, None, 2000).cut_by == "bytes"
    assert select(summary, None, 5, 2000) == Selection("8\n9\n10\n", 8, 10, "bytes")
    assert select(summary, None, None, 2000).cut_by == "bytes"


def test_head_before_the_held_tail_uses_the_prefix() -> None:
    summary = tail_of(TEN, 7)
    assert select(summary, 2, None, 2000, prefix="1\n2\n3\n4") == Selection("1\n2", 1, 2, None)
    # The prefix's cut last line is not shown; what it lacks is cut by bytes.
    assert select(summary, 5, None, 2000, prefix="1\n2\n3\n4") == Selection(
        "1\n2\n3", 1, 3, "bytes"
    )
    # Without one, the newest held lines, as many as selected.
    assert select(summary, 2, None, 2000) == Selection("9\n10\n", 9, 10, "bytes")
