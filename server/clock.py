"""The event loop's clock, read straight from the running loop.

It is the clock anyio's deadlines and `current_time()` use under the asyncio
backend (uvloop included), so the two compare; reading it here skips the
backend lookup anyio makes on every call (four calls more), which a command
paid several times on its way.
"""

from __future__ import annotations

import asyncio


def now() -> float:
    """The running loop's time, in seconds."""
    return asyncio.get_running_loop().time()
