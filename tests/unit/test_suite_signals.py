"""The suite starts its servers and command lines as a host would: with default
signals, whatever its own parent left it.

A CI step run in the background of a non-interactive shell ignores SIGINT and
SIGQUIT, and under `nohup` SIGHUP too. exec keeps an ignored signal ignored, so
every process the suite starts (in-process servers' shells, `bashrpc exec`)
would inherit that, and the cases about Ctrl-C, hang-ups and signal
dispositions would fail for a reason that is not theirs.
"""

from __future__ import annotations

import signal

from bashrpc.server.runtime.containment.child import PYTHON_IGNORED_SIGNALS


def ignored_signals() -> set[signal.Signals]:
    ignored: set[signal.Signals] = set()
    for sig in signal.valid_signals() - PYTHON_IGNORED_SIGNALS:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                ignored.add(sig)
        except ValueError:
            pass  # a real-time signal Python does not name
    return ignored


def test_the_suite_ignores_no_signal_but_pythons_own() -> None:
    assert ignored_signals() == set()
