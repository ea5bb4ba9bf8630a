"""bashrpc's icon, for the clients of MCP 2025-11-25 on that show one beside a
server or a tool.

One small SVG as a data: URI: it scales to any size a client draws, and a
client fetches nothing (no request leaves the machine, nothing to trust but
these bytes). It holds no script, no link and no text, only shapes: a
terminal's prompt, light on dark, readable on a light theme or a dark one.
"""

from __future__ import annotations

import base64

from bashrpc.protocol.mcp import MODERN_PROTOCOL_VERSIONS, Icon

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 48 48">'
    '<rect width="48" height="48" rx="9" fill="#1f2933"/>'
    '<path d="M12 15l10 9-10 9M26 34h11" fill="none" stroke="#e4e7eb"'
    ' stroke-width="4" stroke-linecap="round" stroke-linejoin="round"/>'
    "</svg>"
)
MIME_TYPE = "image/svg+xml"
# The revisions whose server info and tools may name icons (added in 2025-11-25).
ICON_REVISIONS = frozenset({"2025-11-25", *MODERN_PROTOCOL_VERSIONS})

_SRC = f"data:{MIME_TYPE};base64,{base64.b64encode(SVG.encode()).decode()}"


def icons(revision: str | None) -> list[Icon] | None:
    """The icons a client of `revision` gets; None: its revision has none."""
    if revision not in ICON_REVISIONS:
        return None
    return [Icon(src=_SRC, mime_type=MIME_TYPE, sizes=["any"])]
