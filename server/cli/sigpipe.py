"""Ending as a Unix tool does when the reader of its output goes away.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError
instead, and a traceback or an `[Errno 32]` line follows. A tool in a pipeline
(`bashrpc exec … | head`) is expected to end silently, killed by SIGPIPE:
a shell reports that as 141, and `set -o pipefail` scripts rely on it.
"""

from __future__ import annotations

import os
import signal
from typing import NoReturn

# What a shell reports for a program killed by SIGPIPE (128 + 13).
EXIT_SIGPIPE = 128 + signal.SIGPIPE


def die_of_sigpipe() -> NoReturn:
    """End this process by SIGPIPE's default action; nothing else is printed
    or flushed (the pipe is gone, and flushing into it would fail again)."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPIPE})
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(EXIT_SIGPIPE)  # not reached unless the signal could not kill
