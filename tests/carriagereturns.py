"""What a line redrawn with carriage returns leaves in the text result: one
table, run against the fold itself and against real commands on pipes and on
a PTY, which must agree."""

from __future__ import annotations

# (bytes a program writes, the text result). On a PTY the terminal turns each
# LF into CRLF, so the same table holds there.
CASES: list[tuple[bytes, str]] = [
    (b"\r33%\r66%\n", "66%\n"),
    (b"old\rnew\n", "new\n"),
    (b"a\r\nb\r\n", "a\nb\n"),
    (b"x\r\r\ny\n", "x\ny\n"),
    (b"done\nworking 1\rworking 2\n", "done\nworking 2\n"),
    (b"50%\r", "50%"),
    (b"no newline at all", "no newline at all"),
    (b"".join(b"\rprogress %d" % i for i in range(100)) + b"\ndone\n", "progress 99\ndone\n"),
    # Escapes are removed after the fold, as on any line.
    (b"\x1b[32mok\x1b[0m\r\x1b[Kfinal\n", "final\n"),
    # Bytes that are not text: a CR is never part of a UTF-8 sequence.
    (b"\xff\xfe\rtext\n", "text\n"),
    (b"text\xff\r\xe2\x82\xac\n", "\u20ac\n"),
    (b"a\x00b\rc\n", "c\n"),
]
