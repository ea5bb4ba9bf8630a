"""JSON-RPC error codes: the standard ones plus the server-defined range."""

from enum import IntEnum

import msgspec


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # Server-defined errors (-32000 to -32099).
    TOO_MANY_SHELLS = -32001
    # An artifact, or a terminal (ACP's and MCP's code for a resource not found).
    RESOURCE_NOT_FOUND = -32002
    ARTIFACT_NOT_FOUND = -32002  # the same code, by the name it first had
    SERVER_BUSY = -32003
    SHUTTING_DOWN = -32004
    NO_SUCH_PTY = -32005
    SANDBOX_UNAVAILABLE = -32006
    TOO_MANY_JOBS = -32008
    RESUME_GAP = -32009
    # MCP 2026-07-28: the request's revision is not one this server speaks.
    UNSUPPORTED_PROTOCOL_VERSION = -32022
    # MCP 2026-07-28 over HTTP: a header says other than the body it comes with.
    HEADER_MISMATCH = -32020
    # Same value as LSP's RequestCancelled, which MCP hosts already understand.
    REQUEST_CANCELLED = -32800


# `data` of the server-defined errors, as clients decode it.


class UnsupportedVersionData(msgspec.Struct, rename="camel"):
    requested: str
    # Every revision served: the client picks one and asks again.
    supported: list[str]


class TooManyShellsData(msgspec.Struct, rename="camel"):
    live_shells: int


class ArtifactNotFoundData(msgspec.Struct, rename="camel", omit_defaults=True):
    # The newest ids there are, newest first, at most 20 of them.
    available: list[int]
    # The resource URI asked for, on resources/read.
    uri: str | None = None


class NoSuchPtyData(msgspec.Struct, rename="camel"):
    request_id: str | int | None


class ResumeGapData(msgspec.Struct, rename="camel"):
    # The oldest chunk seq still kept: a resume from `firstKept - 1` is exact.
    first_kept: int
    # Chunks asked for that are no longer kept.
    missed: int


class NoSuchTerminalData(msgspec.Struct, rename="camel"):
    terminal_id: str


class TooManyJobsData(msgspec.Struct, rename="camel", omit_defaults=True):
    live_jobs: int
    limit: int
    # The session at its limit; absent when the server's limit was reached.
    session_id: str | None = None


# The `data` each server-defined error carries as a Struct, one per kind of
# thing not found for -32002 (the generated reference lists them); the others
# carry text, or the output so far (-32800).
ERROR_DATA: dict[ErrorCode, tuple[type[msgspec.Struct], ...]] = {
    ErrorCode.TOO_MANY_SHELLS: (TooManyShellsData,),
    ErrorCode.RESOURCE_NOT_FOUND: (ArtifactNotFoundData, NoSuchTerminalData),
    ErrorCode.NO_SUCH_PTY: (NoSuchPtyData,),
    ErrorCode.RESUME_GAP: (ResumeGapData,),
    ErrorCode.TOO_MANY_JOBS: (TooManyJobsData,),
}
