"""One program on a terminal: a one-shot `bash -c` under ptyprocess, and the
screen a VT emulator renders from its bytes."""
