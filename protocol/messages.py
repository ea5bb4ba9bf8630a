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
# -32602 says why in its message too (`bashrpc.protocol.invalidparams`): clients show no `data`.
INVALID_PARAMS_BECAUSE = INVALID_PARAMS + ": {reason}"
INTERNAL_ERROR = "Internal error"
SERVER_BUSY = "too many requests in flight"
REQUEST_OVER_BUDGET = (
    "this request's {size} bytes, with the {held} bytes of the requests already waiting"
    " or running, would pass the daemon's memory budget ([daemon] resumeBudgetBytes ="
    " {budget}); send it again when some have finished"
)
REQUEST_OVER_WHOLE_BUDGET = (
    "this request's {size} bytes are more than the daemon's memory budget"
    " ([daemon] resumeBudgetBytes = {budget}) holds"
)
TOO_MANY_SHELLS = "too many live shells"
SHUTTING_DOWN = "server is shutting down"
REQUEST_CANCELLED = "Request cancelled"

# Details carried in an error's `data`.
PARAMS_NOT_OBJECT = "params must be an object"
PARAMS_NOT_STRUCTURED = "`params` must be an object or an array"
INVALID_UTF8 = "invalid UTF-8 at byte {offset}"
FIELD_HAS_NUL = "Expected a string without NUL characters - at `$.{field}`"
NOT_FINITE = "Expected a finite number - at `$.{field}`"
ENV_ENTRY_TOO_LONG = (
    "`{name}=value` is {size} bytes with its NUL, and the kernel execs no string"
    " over {limit} (MAX_ARG_STRLEN) - at `$.{field}`"
)
ENV_TOO_LARGE = (
    "The environment is too large to exec: {size} bytes with what the server adds"
    " (a pointer each included), where an exec takes {limit} (ARG_MAX) and {room}"
    " of them are kept for command lines - at `$.{field}`"
)
# An editor's stand-in says this where a command has no terminal (the script
# `runtime/seam/noterminal/editor` carries the text; a test holds them equal).
NO_TERMINAL = "{program}: no terminal; use a PTY session or edit the file with a command"
SECRET_WOULD_ECHO = (
    "secret: the terminal echoes what is typed; a secret is written only while echo is off"
    " (at a password prompt)"
)
# What a transcript holds in place of a secret's text.
SECRET_WITHHELD = "[secret withheld]"
CWD_NOT_DIRECTORY = "Not a directory: {path}"
ENVELOPE_JSONRPC = '`jsonrpc` must be "2.0"'
EMPTY_BATCH = "empty batch"
NESTING_TOO_DEEP = "JSON nesting is too deep"
BATCH_MEMBER_NOT_OBJECT = "batch member must be an object"
# The parts of an Invalid params message.
PARAM_PROBLEM = "{field}: {problem}"
PARAM_KEY_OF = "{field} (a key)"
PARAM_MISSING = "required field missing"
PARAM_UNKNOWN = "unknown field"
PARAM_EXPECTED = "expected {expected}"
PARAM_GOT = "{expected}, got {got}"
PARAM_OR = " or "
PARAM_TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
ARTIFACT_NOT_FOUND = "Artifact {id} not found. Available: {available}"
NO_ARTIFACTS = "none"
MORE_ARTIFACTS = "{listed} and {more} older"
# The error names the newest ids only: a workspace may hold thousands.
NOT_FOUND_LISTED_IDS = 20

# Notices written into command output.
NOTICE_CANCELLED = "[Command cancelled]"
NOTICE_TIMED_OUT = "[Command timed out after {seconds} {unit}]"
NOTICE_RESUME_MISSED = (
    "\n[... {count} chunks of streamed output are no longer kept for a resume;"
    " the result and the artifact are complete ...]\n"
)
NO_SUCH_RESUMABLE = "requestId: no request {request_id!r} of this client to attach to"
RESUMED_REQUEST_FAILED = (
    "requestId: request {request_id!r} ended without a result (aborted or failed)"
)
NOTICE_CHUNKS_SKIPPED = (
    "\n[... {count} bytes of streamed output skipped because the client read"
    " slowly; the result and the artifact are complete ...]\n"
)
NOTICE_SHELL_START_FAILED = "bashrpc: could not start shell {shell}: {reason}\n"
# In the first result after a session's shell ended (`shellRestarted: true`).
SHELL_RESTARTED = (
    "[Shell restarted: variables, functions, aliases and exports set by earlier commands"
    " are gone; the session's environment and directory are kept.]"
)
# Starts the output when a new shell could not enter the session's directory.
SHELL_CWD_GONE = (
    "[{cwd} is not there for a new shell (gone, or in an earlier shell's private /tmp):"
    " it started in the workspace, {workspace}.]"
)


def format_seconds(seconds: float) -> str:
    """Render a duration the way a person would type it: 5, not 5.0."""
    return f"{seconds:g}"


def timed_out_notice(seconds: float) -> str:
    unit = "second" if seconds == 1 else "seconds"
    return NOTICE_TIMED_OUT.format(seconds=format_seconds(seconds), unit=unit)


def invalid_params(reason: str) -> str:
    return INVALID_PARAMS_BECAUSE.format(reason=reason)


def newest_ids(available: list[int]) -> list[int]:
    """The ids a not-found error names: newest first, at most `NOT_FOUND_LISTED_IDS`."""
    return sorted(available, reverse=True)[:NOT_FOUND_LISTED_IDS]


def artifact_not_found(artifact_id: int | str, available: list[int]) -> str:
    listed = ", ".join(str(i) for i in newest_ids(available)) or NO_ARTIFACTS
    if len(available) > NOT_FOUND_LISTED_IDS:
        listed = MORE_ARTIFACTS.format(listed=listed, more=len(available) - NOT_FOUND_LISTED_IDS)
    return ARTIFACT_NOT_FOUND.format(id=artifact_id, available=listed)


# The tool-call surface.
BLOCKED = "Blocked: {message}\n\nOriginal command: {command}\n\nStructured recovery: {recovery}"
INTERCEPT_READ = (
    "Use the `read` tool instead of cat/head/tail/less/more. It shows line numbers,"
    " pages through large files and never floods the context."
)
INTERCEPT_GREP = (
    "Use the `grep` tool instead of grep/rg/ag/ack. It respects ignore files and"
    " returns structured, bounded matches."
)
INTERCEPT_FIND = (
    "Use the `find` tool instead of find/fd/locate with name, type or glob filters."
    " It respects ignore files and bounds its results."
)
INTERCEPT_EDIT_SED = (
    "Use the `edit` tool instead of `sed -i`. It shows exactly what changed and fails"
    " loudly when the text to replace is not found."
)
INTERCEPT_EDIT_PERL = (
    "Use the `edit` tool instead of `perl -i`. It shows exactly what changed and fails"
    " loudly when the text to replace is not found."
)
INTERCEPT_EDIT_AWK = (
    "Use the `edit` tool instead of `awk -i inplace`. It shows exactly what changed and"
    " fails loudly when the text to replace is not found."
)
INTERCEPT_WRITE = (
    "Use the `write` tool instead of echo/printf/cat heredocs redirected into a file."
    " It writes the content exactly, with no shell quoting to get wrong."
)
INTERCEPT_BAD_RULE = "interceptor rule {pattern!r} skipped: {reason}"
CWD_MISSING = "Working directory does not exist: {path}"
CWD_NOT_A_DIRECTORY = "Working directory is not a directory: {path}"
NO_OUTPUT = "(no output)"
TRUNCATION_NOTICE = "\n\n[Showing lines {start}-{end} of {total}{limit}.{full}]"
TRUNCATION_LIMIT = " ({limit} limit)"
TRUNCATION_FULL = " Full: artifact://{id}"
EXITED_WITH_CODE = "Command exited with code {code}"
MISSING_EXIT_STATUS = "Command failed: missing exit status"
TIMEOUT_CLAMPED = "\n\n[Timeout {requested}s is outside 1-3600s; using {applied}s]"
TIMEOUT_NULL = "\n\n[Timeout was null; using the default {applied}s]"
UNKNOWN_TOOL = "Unknown tool: {name}"
ARTIFACT_URI_NO_ID = "artifact:// URL requires a numeric ID"
ARTIFACT_URI_NOT_NUMERIC = "artifact:// ID must be numeric, got: {got}"
UNSUPPORTED_URI = "Unsupported resource URI: {uri}"
BASH_TOOL_DESCRIPTION = """\
Run a bash command in a persistent shell and return its combined stdout and stderr.

- Use `cwd` to run somewhere else instead of `cd dir && ...`; each call starts in \
the workspace root unless `cwd` is given.
- Use `head`/`tail` to limit output instead of piping into `| head` or `| tail`: \
the command's real exit status is kept and the full output stays available.
- stderr is already merged into the output; do not add `2>&1`.
- Long output keeps its last {lines} lines, and of those at most the last {limit}; \
the whole output is saved and named as artifact://N.
- Commands time out after `timeout` seconds (default {timeout}, at most 3600). stdin is \
empty, so commands never wait for input; pagers and editors are disabled."""

# Background jobs (`terminal/*`, `bash`'s `background`, the model's job tools).
NO_SUCH_TERMINAL = "No terminal {terminal_id!r} in this session (never created, or released)"
TOO_MANY_JOBS = "too many background jobs"
# The same refusal as the model reads it, in a tool result.
TOO_MANY_JOBS_TOOL = (
    "Too many background jobs ({live} running, the limit is {limit}):"
    " stop one with `bash_kill` before starting another."
)
JOB_STDIN_CLOSED = "terminalId: the stdin of {terminal_id!r} is closed"
BAD_READY_PATTERN = "Invalid regular expression {pattern!r}: {reason} - at `$.ready.log`"
BACKGROUND_WITH = "{field}: a background job runs without one (stop it with `terminal/kill`)"
JOB_CANNOT_START = "command: cannot start {command!r}: {reason}"
JOB_STARTED = "[Running in the background as {terminal_id}]"
JOB_STILL_RUNNING = (
    "[Still running after {seconds} s: it goes on in the background as {terminal_id}]"
)
JOB_EXITED_CODE = "[Background job {terminal_id} ({command}) exited with code {code}]"
JOB_EXITED_SIGNAL = "[Background job {terminal_id} ({command}) was ended by {signal}]"
JOB_NO_NEW_OUTPUT = "(no new output)"
JOB_OUTPUT_MISSED = (
    "[... {count} bytes of output are no longer kept in memory;"
    " the whole output is artifact://{artifact} ...]\n"
)
JOB_RUNNING = "[{terminal_id} is still running]"
# A command that waits for its person, as the model reads it (`prompt` quoted).
JOB_WAITS = "[{terminal_id} is still running, waiting for input: it asks {prompt}]"
JOB_WAITS_SECRET = (
    "[{terminal_id} is still running, waiting for a secret (a password or a passphrase):"
    " it asks {prompt}. Only the user may type it, in their terminal]"
)
NO_PROMPT_TEXT = "(no prompt text)"
TOOL_WAITS_FOR_INPUT = """\
[The command is waiting for input: it asks {prompt}. It is still running, as the \
background job {terminal_id}.]
Answer it with `bash_input` (terminal_id "{terminal_id}" and the text to type; \
Enter is pressed after it), or stop it with `bash_kill`; `bash_output` reads what \
it prints next."""
TOOL_WAITS_FOR_SECRET = """\
[The command is waiting for a secret (a password or a passphrase): it asks {prompt}. \
It is still running, as the background job {terminal_id}.]
Only the user may answer it, typing it in their terminal: tell them so, and never ask \
them for the secret or guess it yourself. `bash_output` reads what it prints next; \
`bash_kill` stops it."""
INPUT_TO_SECRET = (
    "{terminal_id} is waiting for a secret (a password or a passphrase): only the user"
    " may answer it, in their terminal. Do not ask them for it."
)
JOB_KILLED = "[{terminal_id} was killed]"
# The longest command a job's end line quotes.
JOB_COMMAND_SHOWN_CHARS = 60
BASH_OUTPUT_TOOL_DESCRIPTION = """\
Read what a background job (started with `run_in_background`) printed since \
the last read of it, and whether it is still running or how it ended.

- Pass the `terminal_id` the bash tool gave; each call returns only new output.
- Long output keeps its last part; the whole output is named as artifact://N."""
BASH_KILL_TOOL_DESCRIPTION = """\
Stop a background job (started with `run_in_background`, or a command that waits \
for input) and everything it started.

- Pass the `terminal_id` the bash tool gave; its final output is returned."""
BASH_INPUT_TOOL_DESCRIPTION = """\
Type a line into a background job that waits for input (a prompt, a question, a REPL), \
then read what it prints next.

- Pass the `terminal_id` the bash tool gave, and the `text` to type; Enter is \
pressed after it unless `enter` is false.
- Never for a password or a passphrase: only the user may type those."""
# A tool call's bad arguments, as the model reads them (MCP 2025-11-25 on).
INVALID_TOOL_ARGUMENTS = "Invalid arguments for the {tool} tool: {detail}"
# MCP 2026-07-28: a request names its revision.
UNSUPPORTED_PROTOCOL_VERSION = "Unsupported protocol version {requested!r}; supported: {supported}"
REMOVED_METHOD = "{method} is not a method of MCP {revision}"
# MCP tasks: a tools/call run as a background job.
NO_SUCH_TASK = "taskId: no task {task_id!r} (never created here, expired, or another client's)"
TASK_ALREADY_ENDED = "taskId: task {task_id!r} has already ended ({status})"
TASK_CANCELLED = "Cancelled by tasks/cancel"
# MCP 2026-07-28: a call answered `input_required`, sent again with its answer.
REQUEST_STATE_FORGED = "requestState: not one this server made (its signature does not match)"
REQUEST_STATE_EXPIRED = "requestState: expired; send the call again without it"
REQUEST_STATE_REPLAYED = "requestState: already used; each is taken once"
REQUEST_STATE_OTHER_TENANT = "requestState: made for another client"
REQUEST_STATE_OTHER_CALL = (
    "requestState: made for another call; send the same tool and arguments with it"
)
REQUEST_STATE_UNEXPECTED = (
    "requestState: only a 2026-07-28 tools/call of bash, answering its input_required"
    " result, takes requestState or inputResponses"
)
REQUEST_STATE_NO_ANSWER = "inputResponses: no answer under {key!r}"
ELICIT_MESSAGE = "The command `{command}` is waiting for input. It asks: {prompt}"
ELICIT_FIELD_TITLE = "Your answer"
ELICIT_FIELD_DESCRIPTION = "Typed into the command, then Enter."
INPUT_DECLINED = "[The user declined to answer; {terminal_id} was stopped]"
INPUT_ANSWER_STALE = (
    "[The user's answer was not typed: {terminal_id} no longer waits for the prompt it answers]"
)
# A task whose command waits is "working", its statusMessage saying what it asks; it
# never asks by inputRequests, so tasks/update has nothing to answer.
TASK_TAKES_NO_INPUT = (
    "taskId: task {task_id!r} asks no input through tasks/update: when its command"
    " waits for input, its statusMessage says so, and the bash_input tool answers it"
    " (terminal_id {task_id!r})"
)
SERVER_INSTRUCTIONS = (
    "bashrpc runs commands for you in a persistent bash shell through the `bash` tool."
    " Full outputs of long commands are resources at artifact://N."
)
# Tool titles, for people (a host's list of tools, its approval prompt).
BASH_TOOL_TITLE = "Run a bash command"
BASH_OUTPUT_TOOL_TITLE = "Read a background job's output"
BASH_KILL_TOOL_TITLE = "Stop a background job"
BASH_INPUT_TOOL_TITLE = "Answer a background job's prompt"
# The resource link beside a result whose text names an artifact.
ARTIFACT_LINK_NAME = "artifact {id}"
ARTIFACT_LINK_DESCRIPTION = "The command's whole output"
RUN_IN_BACKGROUND_HELP = (
    "Start the command in the background and return at once with its terminal_id: for"
    " servers, watchers and long builds. It has no timeout. Read its output with"
    " `bash_output`, stop it with `bash_kill`; its end is told in a later result."
)

# The PTY path.
PTY_ERROR = "PTY error: {reason}\n"
NO_SUCH_PTY = "No running PTY command with requestId {request_id!r}"
UNKNOWN_KEY = "Unknown key {key!r} - at `$.keys[{index}]`"

# Warnings on stderr.
ARTIFACT_WRITE_FAILED = "artifact {id} could not be written ({reason}); dropping it"
ARTIFACTS_DIR_UNUSABLE = "artifacts directory {path} is unusable: {reason}"
ARTIFACT_CREATE_FAILED = "artifact could not be created in {path}: {reason}"
ARTIFACT_IDS_EXHAUSTED = "artifact ids in {path} are exhausted"
SNAPSHOT_FAILED = "could not capture the shell setup from {rc} ({reason}); shells start without it"
SNAPSHOT_TIMED_OUT = "it did not finish within {seconds} s"
SNAPSHOT_EXITED = "it exited with status {status} before finishing"
SNAPSHOT_TOO_LARGE = "what it defined came to more than {mib} MiB"
SNAPSHOT_ERROR = "it could not be run or kept: {error}"
STDOUT_GONE = "stdout is gone ({reason}); shutting down"
CLIENT_GONE = "a client connection is gone ({reason})"
DRAINING = "received SIGTERM; draining: no new commands, {seconds} s for the running ones"
CLIENT_SILENT = "no input from the client for {seconds} s (--client-timeout); taking it for gone"

# The daemon and its attach bridge.
DAEMON_ALREADY_RUNNING = "another daemon (pid {pid}) is serving {path}; not starting a second one"
DAEMON_DIR_NOT_DIRECTORY = "the socket's directory {path} is not a directory"
DAEMON_DIR_NOT_OURS = (
    "the socket's directory {path} belongs to uid {owner}, not to us (uid {ours}); "
    "choose another --socket"
)
DAEMON_DIR_OPEN = (
    "the socket's directory {path} is mode {mode}: others may reach the socket; "
    "`chmod 700` it, or choose another --socket"
)
ATTACH_PEER_NOT_OURS = (
    "what listens at {path} runs as uid {uid}, not as us (uid {ours}); sent it nothing"
)
DAEMON_PATH_NOT_SOCKET = "{path} exists and is not a socket; not replacing it"
DAEMON_CANNOT_BIND = "cannot listen on {path}: {reason}"
DAEMON_CANNOT_CONNECT = "cannot connect to the daemon at {path}: {reason}"
DAEMON_LISTENING = "daemon listening on {path}"
DAEMON_PEER_REFUSED = "refused a connection from pid {pid}, uid {uid}: not our uid ({ours})"
DAEMON_PEER_SANDBOXED = (
    "refused a connection from pid {pid}: it runs inside a sandbox "
    "(a pid namespace below the daemon's)"
)
DAEMON_TOO_MANY_CLIENTS = (
    "the daemon keeps {limit} clients already, each with a connection "
    "([daemon] maxClients); try again when one has gone"
)
DAEMON_IDLE_EXIT = "no session and no connection for {seconds} s (--idle-exit); exiting"
DAEMON_STOPPING = "received {signal}; ending every connection"
WORKSPACE_NOT_SERVED = (
    "workspace: this server serves {served} (sandbox {mode!r}), not {requested};"
    " a server's workspace is fixed when it starts"
)
ATTACH_REFUSED = (
    "the daemon already running at {path} cannot serve this attach as asked: {reason}"
    " (stop it, or attach to another --socket, to start one with these options)"
)
ATTACH_NO_ANSWER = "the daemon at {path} did not answer this attach's initialize: {reason}"
ATTACH_DAEMON_CLOSED = "it closed the connection"
ATTACH_NO_DAEMON = "no daemon came up at {path} within {seconds} s; see its log at {log}"
DAEMON_DESCRIPTION = """\
Serve JSON-RPC on a unix socket to many connections at once, each as a stdio
server would serve it: its own initialize, host options, sessions and shells.
Only one daemon serves a path; a stale socket (its daemon died) is replaced.
The socket is 0600 in a 0700 directory, and peers of another uid are refused."""
ATTACH_DESCRIPTION = """\
Bridge stdin and stdout to the daemon's socket, starting the daemon (with the
options given here) if none runs there. To a host this is `bashrpc` on stdio:
run it as the target of ssh or `kubectl exec -i`. A daemon already running keeps
its own options: --sandbox, when stricter than its own, applies to this
connection; a looser --sandbox, or a --workspace it does not serve, is refused
(exit status 1, naming the daemon's)."""

# Command-line errors (one line on stderr, exit status 2) and the exec client.
CLI_ERROR = "bashrpc: {message}"
CLI_LINE_LIMIT_TOO_SMALL = "--max-line-bytes must be at least {minimum}"
CLI_BAD_SECONDS = "{value!r} is not a number of seconds in {range}"
CLI_SHELL_NOT_EXECUTABLE = "config: `shell`: not an executable: {shell}"
CLI_WORKSPACE_NOT_DIRECTORY = "--workspace: not a directory: {path}"
CLI_ARTIFACT_NOT_FOUND = (
    "{not_found} (looked in the workspace {workspace}; for another one, pass --workspace DIR)"
)
CLI_ARTIFACT_UNREADABLE = "artifact {id}: {reason}"
CONFIG_ERROR = "config {path}: {reason}"
CONFIG_NOT_FOUND = "file not found"
ENV_VALUE_NOT_STRING = "`env.{name}` must be a string"
ENV_EXCLUDE_NOT_LIST = "`env.exclude` must be a list of patterns"
EXEC_DESCRIPTION = """\
Run one shell command through a bashrpc server started for it, as an agent's
host would: the output streams to stdout as it comes (ANSI sequences and
control characters stripped, byte for byte otherwise, bytes that are not UTF-8
included), then one summary line goes to stderr. The command's stdin is empty:
exec passes none of its own, and refuses to start when its stdin is a pipe, a
socket or a file with bytes left (run it with </dev/null, or let the command
read a file). Ctrl-C aborts the command (its whole process tree) and still
prints the summary. Each run has its own server, so nothing is kept between
runs but the artifact holding a long output."""
EXEC_EPILOG = """\
exit status:
  the command's own   it ran to the end (0-255)
  124                 --timeout passed; the command was killed
  130                 interrupted with Ctrl-C; the command was killed
  1                   the server failed or gave no status
  2                   a bad command line (--timeout, --workspace or --config among
                      others), --sandbox where no sandbox can be made, or a
                      stdin that may hold input (a pipe, a socket, a file)
  141                 the reader of stdout went away (`| head`): the command was
                      killed, and this client died of SIGPIPE, printing nothing more

--timeout is in seconds, in [{min:g}, {max:g}]; without it the command
runs until it ends or is interrupted. A summary naming artifact://N can be
printed again with `bashrpc artifact N`."""
ARTIFACT_DESCRIPTION = """\
Print artifact N, the full output of a long command, to stdout. Artifacts
belong to a workspace: the current directory unless --workspace says
otherwise, as for the server that made it. Under the daemon they belong to
the client (--client-id) or the shared scope (--scope) too."""
EXEC_SERVER_ERROR = "bashrpc: {message}: {data}"
VIA_UNPARSABLE = "--via: {reason}"
VIA_EMPTY = "--via: no launcher given"
VIA_UNSTARTABLE = "--via: {program}: {reason}"
VIA_NOT_FOUND = (
    "--via: the far side found no `{program}` on its PATH (a non-interactive shell's is"
    " short); name its directory: --via '{launcher} env PATH=/dir/of/{program}:/usr/bin:/bin'"
)
VIA_FORCES_TTY = (
    "--via: {flag} forces a terminal, whose line discipline breaks the protocol;"
    " use the launcher without it (ssh -T, podman exec -i)"
)
EXEC_STDIN_REFUSED = (
    "stdin: bashrpc exec does not pass its input to the command (the command's stdin is"
    " empty), and here it is {kind} that may hold some: let the command read a file, or"
    " run it with </dev/null"
)
EXEC_NO_ANSWER = "bashrpc: the server ended without answering"
EXEC_NOT_PROTOCOL = "bashrpc: the server wrote a line that is not JSON-RPC: {reason}"
EXEC_OUTPUT_INCOMPLETE = (
    "bashrpc: part of the output was skipped while this terminal read slowly,"
    " and the artifact does not hold all of it"
)

# The sandbox.
SANDBOX_UNAVAILABLE = "sandbox unavailable: {reason}"
SANDBOX_NO_BWRAP = "bwrap is not installed (Debian and Ubuntu: apt install bubblewrap)"
SANDBOX_BWRAP_FAILED = "bwrap could not create the sandbox: {detail}"
SANDBOX_NO_SOCKET_FILTER = "no unix-socket filter for this machine ({machine})"
SHELL_NOT_SEALED = (
    "sandboxed shells run {program} as it is, not sealed ({reason}): a program a command"
    " runs there may read its shell's control pipe and memory"
)
SEAL_NOT_ELF = "not an ELF binary"
SEAL_NOEXEC = "the runtime directory {directory} is on a noexec mount"
SANDBOX_LOOSER = (
    "sandbox mode {requested!r} is looser than {configured!r}; a request may only tighten it"
    " (off < full < workspace-write < read-only)"
)
SANDBOX_LOOSER_THAN_CONNECTION = (
    "sandbox mode {requested!r} is looser than this connection's {current!r}; a later"
    " initialize may only tighten it (off < full < workspace-write < read-only)"
)
SANDBOX_TIGHTENED = "[The session's sandbox was tightened to {mode}: its shell restarted in it.]"
SANDBOX_TIGHTEN_BUSY = (
    "session {session!r} is running a command: its sandbox can be tightened to {mode!r}"
    " once the command ends (or is aborted)"
)
SANDBOX_DENIED = (
    "[The sandbox ({mode}) denied writing {path}; writable: {writable}."
    " Ask the user to run it, or to widen the sandbox.]"
)
SANDBOX_PRIVATE_TMP = "/tmp (private to this shell)"
# The network allowlist (`[sandbox.network]`) and its proxy.
NETWORK_PATTERN_WILDCARD = "a wildcard is `*.` at the start only"
NETWORK_PATTERN_BAD = "not a host name or an IP address"
NETWORK_PATTERN_SHORT = "a wildcard needs a domain of two labels or more"
NETWORK_BAD_ENTRY = "sandbox.network.{field}: {entry!r}: {why}"
NETWORK_WIDER_MODE = (
    "network mode {asked!r} is wider than the server's {mode!r} (off < allowlist < host)"
)
NETWORK_WIDER_ALLOW = "network allow entries outside the server's allowlist: {entries}"
NETWORK_WIDER_PORTS = "network ports outside the server's: {ports}"
# The body of the proxy's 403 and the text of a SOCKS refusal, by reason.
NETWORK_REFUSED = {
    "denied": "{host}:{port} is refused by sandbox.network.deny entry {rule!r}",
    "not-allowed": "{host}:{port} is not in sandbox.network.allow",
    "port": "{host}:{port}: port {port} is not in sandbox.network.ports",
    "address": (
        "{host}:{port} resolves to {rule}, refused unless sandbox.network.allow lists {rule}"
    ),
    "invalid": "{host!r} is not a host name or an IP address",
    "malformed": "the proxy could not read the request ({rule})",
    "unresolved": "{host}:{port}: the name does not resolve",
    "unreachable": "{host}:{port}: the connection failed",
    "sni": "{host}:{port}: the TLS ClientHello names another host ({rule})",
    "smuggled": "{host}:{port}: the request's Host header names another host ({rule})",
}
CLI_BAD_NETWORK_ENTRY = "{entry!r}: {why}"
NETWORK_SESSION_EXISTS = (
    "session {session!r} exists: its network is set when it opens (close it and open it again)"
)
NETWORK_HINT = "Ask the user to allow it in sandbox.network."
NETWORK_DENIED = (
    "[The sandbox's network allowlist refused {hosts}."
    " Ask the user to allow it (sandbox.network.allow), rather than retrying.]"
)
# The git guard's refusals: what no bind can keep from a command, and why.
GIT_GUARD_REFUSED = (
    "the git guard cannot protect {what}: {why}, and the host's git would run what a"
    " command wrote there. Fix that, or use sandbox mode read-only"
)
GIT_GUARD_NAMED = "{path} ({reason})"
GIT_GUARD_ENCLOSED = (
    "the writable root {root}, inside the repository {repository} without a .git of its own"
)
GIT_GUARD_MAY_INIT = "a command could make one there (git init); open the repository's top instead"
GIT_GUARD_INDEX = "the index {path} (its gitlinks)"
GIT_GUARD_UNREADABLE = "it cannot be read ({detail}), so its submodules are unknown"
# Why a path is kept: what git reads it as.
GIT_GUARD_CHECKOUT = "a submodule's checkout"
GIT_GUARD_DOT_GIT_LINK = "a .git that is a symlink"
GIT_GUARD_GITDIR = "the git dir a .git file names"
GIT_GUARD_GLOBAL = "a global or system git config"
GIT_GUARD_LINK_TARGET = "where a git dir's {name} links"
GIT_GUARD_TOO_DEEP = "nested deeper than the scan goes"
GIT_GUARD_TOO_MANY = "holding more git dirs than are pinned one by one"
GIT_GUARD_DOT_GIT_ODD = "a .git that is neither a file nor a directory (a FIFO, a socket, a device)"
GIT_GUARD_CONFIG = "the git config {path}"
GIT_GUARD_HOSTILE = "it is not a regular file git could read whole ({detail})"
GIT_GUARD_TOO_SLOW = "the scan of {root} took over {seconds:g} s"
# A root kept read-only in a shell, rather than the shell refused: see the sandbox page.
GIT_GUARD_SEALED = "git guard: {root} is read-only in this shell: {what}"
GIT_GUARD_POINTER_REFUSED = (
    "git guard: {path} names {target}, which is neither a git dir in the writable roots"
    " nor one the host's git made for that checkout: not followed, and kept as it is"
)
GIT_GUARD_COMMONDIR_REFUSED = (
    "git guard: the commondir of {path} names {target}, which is not a git dir in the"
    " writable roots: not followed, and {path} kept read-only"
)

# The daemon's WebSocket listener (`--listen`).
WS_NEEDS_LIBRARY = "--listen needs the websockets library: pip install 'bashrpc[ws]'"
WS_BAD_LISTEN = "--listen {url!r}: expected ws://HOST:PORT, HOST an IP address or localhost"
WS_NO_TOKEN = "--listen needs --token-file, or --insecure-loopback on a loopback address"
WS_INSECURE_NOT_LOOPBACK = "--insecure-loopback: {host} is not a loopback address"
WS_TOKEN_FILE = "--token-file {path}: {reason}"
WS_TOKEN_EXPOSED = "others may read it, or the group write it (mode {mode}); chmod 600 it"
WS_TOKEN_WEAK = "the token must be at least {minimum} printable ASCII characters, no spaces"
WS_REFUSED = "refused a websocket from {peer}: {reason}"
WS_NO_BEARER = "no bearer token"
WS_WRONG_TOKEN = "wrong token"
WS_TOO_MANY_WRONG = "too many wrong tokens from this address; try again later"
WS_REFUSALS_LEFT_OUT = " ({count} refusals before this one not logged)"
WS_FROM_BROWSER = "an Origin header ({origin}): no browser is let in"
WS_TOO_BIG = "closed the websocket from {peer}: a message over {limit} bytes (--max-line-bytes)"
WS_BAD_LISTEN_SCHEME = (
    "--listen {url!r}: expected ws://HOST:PORT or http://HOST:PORT/PATH,"
    " HOST an IP address or localhost"
)

# The daemon's Streamable HTTP listener (`--listen http://...`).
MCP_HTTP_NO_TOKEN = "--listen {url}: {host} is not a loopback address, so --token-file is needed"
MCP_HTTP_REFUSED = "refused an HTTP request from {peer}: {reason}"
MCP_HTTP_BAD_HOST = "Host {host!r} is not this loopback listener (DNS rebinding?)"
MCP_HTTP_BAD_ORIGIN = "Origin {origin!r} is not this loopback listener (DNS rebinding?)"
MCP_HTTP_NOT_OWN = (
    "only the daemon's own user may connect without a token; start it with --token-file"
)
MCP_HTTP_NOT_FOUND = "no such path; MCP is served on {path}"
MCP_HTTP_METHOD = "only POST, GET and DELETE"
MCP_HTTP_NO_SESSION = "needs an Mcp-Session-Id header (from the initialize response)"
MCP_HTTP_UNKNOWN_SESSION = "no such session (it ended, or never was): initialize again"
MCP_HTTP_CONTENT_TYPE = "the body must be Content-Type: application/json"
MCP_HTTP_ACCEPT = "Accept must name application/json or text/event-stream"
MCP_HTTP_NOT_JSON_RPC = "the body is not a JSON-RPC message or a batch of them"
MCP_HTTP_TOO_MANY_STREAMS = "this session has {limit} streams open already"
MCP_HTTP_TOO_MANY_SESSIONS = "{limit} sessions (or stateless exchanges) are open already"
MCP_HTTP_STREAM_OPEN = "this session's GET stream is open already"
MCP_HTTP_SESSION_IDLE = "ended an idle Streamable HTTP session"
MCP_HTTP_CHUNKED = "a chunked body is not taken: send Content-Length"
MCP_HTTP_TOO_BIG = "the body is over --max-line-bytes"
MCP_HTTP_HEADER_MISSING = (
    "the request's _meta names revision {named}: send the header MCP-Protocol-Version: {named}"
)
MCP_HTTP_MIRROR_MISMATCH = "header {header} is {sent!r}, but the request's body says {value!r}"
MCP_HTTP_HEADER_MISMATCH = (
    "MCP-Protocol-Version {header} does not match the revision the request's _meta names ({named})"
)

# -- the daemon's HTTP probes (--http) and the fleet's figures -------------------
HTTP_BAD_ADDRESS = "--http {address!r}: expected HOST:PORT, HOST an IP address or localhost"
HTTP_NO_TOKEN = "--http on {host}, not a loopback address, needs --token-file"
HTTP_PROBES_OPEN_LOOPBACK = "--http-open-probes is for a non-loopback --http with --token-file"
HTTP_LISTENING = "probes and metrics on http://{address}"
HTTP_NOT_FOUND = "no such path; try /livez, /readyz or /metrics"
HTTP_METHOD = "only GET and HEAD"
HTTP_BAD_REQUEST = "not an HTTP/1.x request head"
HTTP_TOO_BIG = "request head too large"
HTTP_UNAUTHORIZED = "needs Authorization: Bearer <token>"
HTTP_NO_METRICS = "/metrics needs prometheus_client: pip install 'bashrpc[metrics]'"
# stderr was not read fast enough: lines were dropped rather than waited for.
LOG_LINES_DROPPED = "{count} log lines dropped: stderr was not read"
READY_DRAINING = "draining after SIGTERM: new commands are refused"
READY_STOPPING = "stopping: every connection is ending"
READY_NO_SANDBOX = "the configured sandbox ({mode}) cannot start: {reason}"
READY_RC_CAPTURE = "the last capture of the user's rc failed; new shells start without it"
RESUME_GAP = (
    "request {request_id!r}: {missed} chunks after seq {after_seq} are no longer kept"
    " (the first kept is {first_kept}); attach with acceptGap to resume from there"
)
NO_SUCH_SESSION = "sessionId: no session {session!r}"

# Transcripts: `bashrpc record` and `bashrpc replay`.
RECORD_DESCRIPTION = """\
Start the server with SERVER_ARGS (after --) for a host that spawns this in
place of `bashrpc`: every line passes through unchanged, both ways, and the
session is written to FILE as a transcript (JSON Lines) as it goes, readable
by its owner alone (it holds every command and env value as sent). The run's
workspace, HOME, artifacts and temporary directories are written as
placeholders, so `bashrpc replay` can check it anywhere."""
RECORD_USAGE = "bashrpc record --out FILE [--rule FIELD REGEX REPLACEMENT]... [-- SERVER_ARGS...]"
REPLAY_USAGE = (
    "bashrpc replay FILE... [--update] [--trust] [--fixture DIR] [--wait SECONDS]"
    " [-- SERVER_ARGS...]"
)
RECORD_BAD_RULE = "--rule: {pattern!r} is not a regular expression: {reason}"
REPLAY_DESCRIPTION = """\
Replay each transcript against a fresh server (SERVER_ARGS after --, else the
transcript's own) in a fresh temporary workspace, HOME and artifacts
directory, sending the host's messages in their recorded causal order, and
compare what the server says once normalized. Exit status: 0 when all match,
1 when one differs (the difference names the request and the field), 2 for a
usage error. --update writes what this run received as the expected side of
each transcript that differed. A transcript runs its commands on this machine:
replay only those you would run yourself. The header's server arguments may
only tighten the sandbox unless --trust is given, and its fixture must lie in
the transcript's folder."""
RECORD_CANNOT_WRITE = "--out {path}: {reason}"
REPLAY_BAD_RULE = "line 1: rule {pattern!r} is not a regular expression: {reason}"
REPLAY_NO_FIXTURE = "fixture {path}: not a directory"
REPLAY_FIXTURE_OUTSIDE = (
    "fixture {path}: not a folder inside the transcript's folder (a transcript's fixture"
    " may name only its own folder or one below it)"
)
REPLAY_BAD_FIXTURE = "fixture {path}: {reason}"
FIXTURE_NOT_PLAIN = "{entry} is not a regular file or a directory (only those are copied)"
FIXTURE_TOO_BIG = "more than {entries} entries or {size} bytes"
REPLAY_UNTRUSTED_ARGS = (
    "{path}: the header's server argument {arg!r} could loosen the sandbox or run"
    " something else; replay with --trust if you trust this transcript, or give the"
    " server's arguments after --"
)
TRANSCRIPT_TOO_DEEP = "line {number}: nested deeper than {limit} levels"
REPLAY_MATCHED = "ok {path}"
REPLAY_DIFFERS = "FAILED {path}"
REPLAY_UPDATED = "updated {path}"
REPLAY_LOG_TAIL = "  the server's log ended with:"

# Secrets: what output never shows, and the values a host may register.
REDACTED = "[REDACTED:{name}]"
SECRET_TOO_SHORT = (
    "secret {name!r} is {length} bytes long: a secret must be at least {minimum} bytes,"
    " since a shorter one cannot be redacted without destroying ordinary output"
)
SECRET_NAME_INVALID = (
    "secret name {name!r} is not allowed: use 1 to 64 letters, digits, '_', '-' or '.'"
)
SECRET_ENV_MISSING = "secretEnv names {name!r}, which is not in env"
REDACT_OPT_OUT_REFUSED = (
    "redact: false is refused: the server's settings keep redaction on"
    " ([secrets] hostMayOptOut = false)"
)
SECRET_PATTERN_INVALID = "[secrets] patterns: {pattern!r} is not a regular expression: {reason}"
