"""Logging to stderr only: stdout belongs to the protocol."""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "bashrpc"


def setup(level: str = "WARNING") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("bashrpc: %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def get(name: str) -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


def announce(message: str) -> None:
    """Said whatever the log level: what a person needs to use the process (the
    port a listener bound when asked for any)."""
    print(f"bashrpc: {message}", file=sys.stderr, flush=True)
