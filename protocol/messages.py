"""Every user-visible string the server produces, in one place.

Tests quote these constants instead of copying the text, so the wording can
change without a hunt through the code.
"""

# JSON-RPC error messages.
PARSE_ERROR = "Parse error"
INVALID_REQUEST = "Invalid request"
MESSAGE_TOO_LARGE = "message too large"
METHOD_NOT_FOUND = "Method not found"
INVALID_PARAMS = "Invalid params"
INTERNAL_ERROR = "Internal error"
SERVER_BUSY = "too many requests in flight"
SHUTTING_DOWN = "server is shutting down"
REQUEST_CANCELLED = "Request cancelled"

# Details carried in an error's `data`.
PARAMS_NOT_OBJECT = "params must be an object"
PARAMS_NOT_STRUCTURED = "`params` must be an object or an array"
FIELD_HAS_NUL = "Expected a string without NUL characters - at `$.{field}`"
CWD_NOT_DIRECTORY = "Not a directory: {path}"
ENVELOPE_JSONRPC = '`jsonrpc` must be "2.0"'
EMPTY_BATCH = "empty batch"
NESTING_TOO_DEEP = "JSON nesting is too deep"
BATCH_MEMBER_NOT_OBJECT = "batch member must be an object"
ARTIFACT_NOT_FOUND = "Artifact {id} not found. Available: {available}"
NO_ARTIFACTS = "none"

# Notices written into command output.
NOTICE_CANCELLED = "[Command cancelled]"
NOTICE_TIMED_OUT = "[Command timed out after {seconds} seconds]"
NOTICE_CHUNKS_SKIPPED = (
    "\n[... {count} characters of streamed output skipped because the client read"
    " slowly; the result and the artifact are complete ...]\n"
)
NOTICE_SHELL_START_FAILED = "bashrpc: could not start shell {shell}: {reason}\n"


def format_seconds(seconds: float) -> str:
    """Render a duration the way a person would type it: 5, not 5.0."""
    return f"{seconds:g}"


def timed_out_notice(seconds: float) -> str:
    return NOTICE_TIMED_OUT.format(seconds=format_seconds(seconds))


def artifact_not_found(artifact_id: int, available: list[int]) -> str:
    listed = ", ".join(str(i) for i in available) or NO_ARTIFACTS
    return ARTIFACT_NOT_FOUND.format(id=artifact_id, available=listed)
