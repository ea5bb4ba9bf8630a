"""Domain errors: what went wrong, in the runtime's own terms.

Runtime and service code raises these and knows nothing of JSON-RPC; one
table, `bashrpc.server.wire.errormap`, turns each into an error code, message and
data for the wire.
"""

from __future__ import annotations

from typing import Any


class BashrpcError(Exception):
    """Base of the errors a request may end with on purpose."""


class InvalidArgument(BashrpcError):
    """A parameter is well-typed but unusable; `detail` says why, naming the field."""

    def __init__(self, detail: str, message: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        # A message of its own (resource URIs have precise ones), else the standard one.
        self.message = message


class InvalidToolArguments(InvalidArgument):
    """The arguments to a known tool are bad: from MCP 2025-11-25 a tool error
    the model reads and corrects, not a protocol error its client swallows."""


class UnsupportedProtocolVersion(BashrpcError):
    """A request names an MCP revision this server does not speak."""

    def __init__(self, requested: str) -> None:
        super().__init__(requested)
        self.requested = requested


class RemovedMethod(BashrpcError):
    """A method the request's MCP revision no longer has (`ping` in 2026-07-28)."""

    def __init__(self, method: str, revision: str) -> None:
        super().__init__(method)
        self.method = method
        self.revision = revision


class TooManyShells(BashrpcError):
    def __init__(self, live: int) -> None:
        super().__init__(live)
        self.live = live


class ArtifactNotFound(BashrpcError):
    # The id as a number, or as the digits asked for when no number that long exists.
    def __init__(
        self, artifact_id: int | str, available: list[int], uri: str | None = None
    ) -> None:
        super().__init__(artifact_id)
        self.artifact_id = artifact_id
        self.available = available
        self.uri = uri


class SandboxUnavailable(BashrpcError):
    """A sandboxed shell was asked for and bwrap cannot make one; never run unsandboxed."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        # What bwrap itself said, when it started and failed.
        self.detail = detail


class NoSuchPty(BashrpcError):
    def __init__(self, request_id: Any) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class ServerBusy(BashrpcError):
    """More requests in flight than the server takes at once."""


class OverBudget(ServerBusy):
    """A request whose bytes, with those of the requests already in flight, would
    pass the daemon's memory budget (`held` of `budget` bytes are taken)."""

    def __init__(self, size: int, held: int, budget: int) -> None:
        super().__init__(size)
        self.size = size
        self.held = held
        self.budget = budget


class ShuttingDown(BashrpcError):
    """The server is shutting down and takes no new work."""


class RequestCancelled(BashrpcError):
    """A request was cancelled; `output` is what its command printed until then."""

    def __init__(self, output: str | None = None) -> None:
        super().__init__(output)
        self.output = output


class ResumeGap(BashrpcError):
    """A resume asked for output no longer kept, and did not accept the gap."""

    def __init__(self, request_id: Any, after_seq: int, first_kept: int, missed: int) -> None:
        super().__init__(request_id, after_seq, first_kept, missed)
        self.request_id = request_id
        self.after_seq = after_seq
        self.first_kept = first_kept
        self.missed = missed


class NoSuchTerminal(BashrpcError):
    """No job of that terminal id in that session (never made, or released)."""

    def __init__(self, terminal_id: str) -> None:
        super().__init__(terminal_id)
        self.terminal_id = terminal_id


class TooManyJobs(BashrpcError):
    """A job past the limit of a session (`session_id`) or of the server (None)."""

    def __init__(self, live: int, limit: int, session_id: str | None) -> None:
        super().__init__(live)
        self.live = live
        self.limit = limit
        self.session_id = session_id
