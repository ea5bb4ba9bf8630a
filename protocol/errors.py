"""JSON-RPC error codes: the standard ones plus the server-defined range."""

from enum import IntEnum


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # Server-defined errors (-32000 to -32099).
    TOO_MANY_SHELLS = -32001
    ARTIFACT_NOT_FOUND = -32002
    SERVER_BUSY = -32003
    SHUTTING_DOWN = -32004
    NO_SUCH_PTY = -32005
    # Same value as LSP's RequestCancelled, which MCP hosts already understand.
    REQUEST_CANCELLED = -32800
