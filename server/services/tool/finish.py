"""The model's bash tool after its command ran: the result shaped for the
model (step 8; see `toolplan`), or a tool error in its place.
"""

from __future__ import annotations

from bashrpc.protocol.mcp import BashStructured, CallToolResult, TextContent, ToolDetails
from bashrpc.server import errors
from bashrpc.server.output.artifacts import ArtifactStore
from bashrpc.server.services.outcome import Outcome
from bashrpc.server.services.tool.shaping import Shaping, shape


def tool_error(text: str, details: ToolDetails | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=BashStructured(
            output=text, exit_code=None, cancelled=False, timed_out=False, truncation=None
        ),
        is_error=True,
        details=details,
    )


def finish(outcome: Outcome, shaping: Shaping, artifacts: ArtifactStore) -> CallToolResult:
    """Step 8; a cancelled call answers -32800 with the output so far."""
    if outcome.cancelled and not outcome.timed_out:
        raise errors.RequestCancelled(outcome.summary.text)
    return shape(outcome, shaping, _head_prefix(outcome, shaping, artifacts))


def _head_prefix(outcome: Outcome, shaping: Shaping, artifacts: ArtifactStore) -> str | None:
    """The artifact's first bytes, when `head` may want lines the summary no longer holds.

    As many bytes as a result may show: a selection past them is cut by that cap anyway."""
    if shaping.head is None or not outcome.summary.truncated or outcome.artifact_id is None:
        return None
    try:
        chunk = artifacts.read(outcome.artifact_id, 0, shaping.max_bytes)
    except (errors.ArtifactNotFound, OSError):
        return None
    return chunk.data.decode("utf-8", "replace")
