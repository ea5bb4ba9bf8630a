from bashrpc.server.services.tool.bashparse import Redirect, SimpleCommand, simple_commands


def names(command: str) -> list[str]:
    return [c.words[0] for c in simple_commands(command)]


def test_lists_pipelines_and_newlines_are_split_into_simple_commands() -> None:
    assert names("a && b || c; d & e\nf | g |& h") == list("abcdefgh")


def test_a_pipe_then_a_newline_or_comment_continues_the_pipeline() -> None:
    first, second = simple_commands("printf 'x\\n' |\n  # why\n  grep x")
    assert (first.words, first.piped) == (("printf", "x\\n"), False)
    assert (second.words, second.piped) == (("grep", "x"), True)


def test_assignments_and_leading_redirections_are_not_part_of_the_command() -> None:
    (command,) = simple_commands("A=1 B='x y' <&3 cat \"my file\" 2>&1")
    assert command.words == ("cat", "my file")
    assert command.text == 'cat "my file" 2>&1'
    assert command.redirects == (Redirect("<&", "3"), Redirect(">&", "1", fd="2"))


def test_redirections_after_a_list_belong_to_its_last_command() -> None:
    first, second = simple_commands("echo a && echo b >| f")
    assert first.redirects == ()
    assert second.redirects == (Redirect(">|", "f"),)


def test_a_heredoc_keeps_what_follows_its_delimiter() -> None:
    cat, grep = simple_commands("cat <<'EOF' | grep x > out\nbody > no\nEOF")
    assert cat.words == ("cat",) and cat.redirects == (Redirect("<<", ""),)
    assert grep.words == ("grep", "x") and grep.piped
    assert grep.redirects == (Redirect(">", "out"),)
    (cat,) = simple_commands("cat <<'EOF' > out\nbody\nEOF")
    assert cat.redirects == (Redirect("<<", ""), Redirect(">", "out"))


def test_words_after_a_parse_error_are_not_arguments() -> None:
    # The grammar fails at the `|` after `> out` on a heredoc's line.
    (cat,) = simple_commands("cat <<'EOF' > out | grep x\nbody\nEOF")
    assert cat.words == ("cat",) and cat.redirects == (Redirect("<<", ""), Redirect(">", "out"))
    (echo,) = simple_commands("echo a > f b")
    assert echo.words == ("echo", "a", "b")


def test_substitutions_are_not_commands_of_the_line() -> None:
    assert names("x=$(cat f); diff <(sort a) b; echo `date`") == ["diff", "echo"]


def test_quoting_is_removed_and_expansions_kept() -> None:
    (command,) = simple_commands("""echo 'a -> b' "<p> $HOME" a\\ b c"d"'e'""")
    assert command.words == ("echo", "a -> b", "<p> $HOME", "a b", "cde")
    assert command.redirects == ()


def test_literal_cds_are_tracked_and_subshells_forget_theirs() -> None:
    commands = simple_commands("cd a && (cd b; x) && cd $D && y")
    assert [(c.words[0], c.cds) for c in commands] == [
        ("cd", ()),
        ("cd", ("a",)),
        ("x", ("a", "b")),
        ("cd", ("a",)),
        ("y", ("a",)),
    ]


def test_broken_syntax_still_yields_what_parses() -> None:
    assert names("cat 'unterminated") == ["cat"]
    assert simple_commands("") == []
    assert all(isinstance(c, SimpleCommand) for c in simple_commands(")) ;; fi done"))
