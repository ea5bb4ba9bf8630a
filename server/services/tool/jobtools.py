"""The model's background jobs: `run_in_background`, `bash_output`, `bash_kill`,
`bash_input` (a line typed into a job that waits for input).

A job the model starts runs in the tool session, where its bash commands
run, and is never announced with `terminal/exited` (an MCP client would not
know it): its end is told instead in the next tool result, as one line
(`with_job_ends`), unless `bash_output` or `bash_kill` said it first. Each
job keeps the model's own cursor, so `bash_output` returns only what is new;
output no longer in memory is named, with the artifact that has it. A job
the model kills is released: it has said all it will.
"""

from __future__ import annotations

import json

import anyio

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    BASH_INPUT_TOOL,
    BASH_KILL_TOOL,
    BASH_OUTPUT_TOOL,
    BashStructured,
    CallToolResult,
    JobInputArguments,
    JobToolArguments,
    TextContent,
    ToolsCallParams,
)
from bashrpc.protocol.schema import inline_schema
from bashrpc.server import errors
from bashrpc.server.output.utf8 import char_start
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.services.commands import CommandSpec
from bashrpc.server.services.jobs import JobService, JobStart, end_line
from bashrpc.server.services.tool import jobview
from bashrpc.server.services.tool.args import decoded
from bashrpc.server.services.tool.finish import tool_error
from bashrpc.server.settings import Settings

TOOLS = (BASH_OUTPUT_TOOL, BASH_KILL_TOOL, BASH_INPUT_TOOL)
# How long `bash_input` waits for what its answer brings: the job's end or its next
# wait (a wait is told after the settle time), else the output so far.
INPUT_REPLY_SECONDS = 3.0


def definitions() -> list[tuple[str, str, dict[str, object]]]:
    """(name, description, input schema) of the job tools, in their fixed order."""
    schema = inline_schema(JobToolArguments)
    return [
        (BASH_OUTPUT_TOOL, messages.BASH_OUTPUT_TOOL_DESCRIPTION, schema),
        (BASH_KILL_TOOL, messages.BASH_KILL_TOOL_DESCRIPTION, schema),
        (BASH_INPUT_TOOL, messages.BASH_INPUT_TOOL_DESCRIPTION, inline_schema(JobInputArguments)),
    ]


def text_result(text: str, exit_code: int | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=BashStructured(
            output=text, exit_code=exit_code, cancelled=False, timed_out=False, truncation=None
        ),
    )


async def start(terminals: JobService, spec: CommandSpec) -> CallToolResult:
    """`run_in_background`: the planned command as a job of the tool session."""
    job = await launch(terminals, spec)
    if isinstance(job, CallToolResult):
        return job
    return text_result(messages.JOB_STARTED.format(terminal_id=job.id))


async def launch(terminals: JobService, spec: CommandSpec) -> Job | CallToolResult:
    """The planned command as a job of the tool session; past the job limit, a
    tool error the model reads (a JSON-RPC error would reach the client, not the
    model)."""
    what = JobStart(
        spec.session_id,
        spec.command,
        cwd=spec.cwd,
        sandbox=spec.sandbox,
        field_prefix=spec.field_prefix,
    )
    try:
        return await terminals.start(what, announce=False)
    except errors.TooManyJobs as exc:
        return tool_error(messages.TOO_MANY_JOBS_TOOL.format(live=exc.live, limit=exc.limit))


async def call(
    terminals: JobService, params: ToolsCallParams, session_id: str, settings: Settings
) -> CallToolResult:
    """`bash_output`, `bash_kill` or `bash_input`; an unknown job is a tool error
    the model reads."""
    if params.name == BASH_INPUT_TOOL:
        answer = decoded(params, JobInputArguments)
        terminal_id = answer.terminal_id
    else:
        terminal_id = decoded(params, JobToolArguments).terminal_id
    try:
        job = terminals.job(session_id, terminal_id)
    except errors.NoSuchTerminal:
        return tool_error(messages.NO_SUCH_TERMINAL.format(terminal_id=terminal_id))
    if params.name == BASH_KILL_TOOL:
        await terminals.kill(job)
    if params.name == BASH_INPUT_TOOL:
        refused = await type_into(job, answer.text, enter=answer.enter)
        if refused is not None:
            return refused
    result = report(job, settings.output.max_bytes)
    if params.name == BASH_KILL_TOOL:
        await terminals.release(job)
    return result


def report(job: Job, max_bytes: int) -> CallToolResult:
    """What the job printed since the model last read, and how it stands."""
    text = _new_output(job, max_bytes)
    if not job.exited.is_set():
        status = status_line(job)
    else:
        jobview.of(job).told_end = True
        status = end_line(job)
    exit_code = None if job.exit is None else job.exit.code
    return text_result(text + status, exit_code)


def status_line(job: Job) -> str:
    """A running job's state in one line: what it asks, when it waits for input."""
    wait = job.input_wait
    if wait is None:
        return messages.JOB_RUNNING.format(terminal_id=job.id)
    shown = quoted_prompt(wait.prompt)
    template = messages.JOB_WAITS_SECRET if wait.secret else messages.JOB_WAITS
    return template.format(terminal_id=job.id, prompt=shown)


def quoted_prompt(prompt: str) -> str:
    """The prompt quoted as the model reads it, or that there is no text."""
    text = prompt.strip()
    return json.dumps(text, ensure_ascii=False) if text else messages.NO_PROMPT_TEXT


async def type_into(job: Job, text: str, *, enter: bool) -> CallToolResult | None:
    """A line typed into the job, then what it brings awaited: the job's end or
    its next wait, or `INPUT_REPLY_SECONDS`. A secret prompt is refused (the tool
    error returned): only the user answers one."""
    before = job.input_wait
    if before is not None and before.secret:
        return tool_error(messages.INPUT_TO_SECRET.format(terminal_id=job.id))
    if job.exited.is_set():
        return None
    end = ("\r" if job.terminal is not None else "\n") if enter else ""
    try:
        await job.write((text + end).encode())
    except errors.InvalidArgument as exc:
        return tool_error(str(exc))
    with anyio.move_on_after(INPUT_REPLY_SECONDS):
        while not job.exited.is_set():
            wait = job.input_wait
            if wait is not None and wait is not before:
                break
            await job.changed()
    return None


def _new_output(job: Job, max_bytes: int) -> str:
    """What came since the model last read, its tail within `max_bytes`, gaps said."""
    view = jobview.of(job)
    text, view.cursor = output_after(job, view.cursor, max_bytes)
    return text


def output_after(job: Job, cursor: int, max_bytes: int) -> tuple[str, int]:
    """The output from `cursor` on, its tail within `max_bytes`, gaps said; and
    where it ends."""
    piece = job.ring.after(cursor)
    data = piece.data
    missed = 0 if piece.missed_from is None else piece.start - piece.missed_from
    cut = char_start(data, max(0, len(data) - max_bytes))
    missed += cut
    data = data[cut:]
    text = data.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        text += "\n"
    if missed:
        notice = messages.JOB_OUTPUT_MISSED.format(count=missed, artifact=job.artifact_id)
        text = notice + text
    return text or messages.JOB_NO_NEW_OUTPUT + "\n", piece.end


def untold_ends(terminals: JobService, session_id: str) -> list[str]:
    """One line per job of the session that ended since a tool result last said so;
    each is said once."""
    lines = []
    for job in terminals.jobs(session_id):
        view = jobview.of(job)
        if job.exited.is_set() and not view.told_end:
            view.told_end = True
            lines.append(end_line(job))
    return lines


def with_job_ends(result: CallToolResult, lines: list[str]) -> CallToolResult:
    """The result with one line per job of the session that ended unsaid."""
    if not lines or not result.content:
        return result
    tail = "".join(f"\n{line}" for line in lines)
    result.content[0] = TextContent(text=result.text + tail)
    if result.structured_content is not None:
        result.structured_content.output += tail
    return result
