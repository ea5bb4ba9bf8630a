"""A model's tool call whose command waits for input: answered at once.

A tool call on a terminal (`bash.virtualTerminal`) may meet a prompt. Rather
than leave the model waiting until the timeout, the call answers as soon as the
wait is told: the output so far, what the prompt asks, and that the command
goes on as a background job of the tool session, which the model answers with
`bash_input`, reads with `bash_output` or stops with `bash_kill`. A secret
prompt (no echo) is for the user alone: the text says so, and `bash_input`
refuses it; the host hears of it by `bash/needsInput` with `secret: true`.
A command that ends before it waits is answered as ever; so is one that waits
when the job limit leaves no room for it (at its end).
"""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import CallToolResult
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.services import held
from bashrpc.server.services.held import Hold
from bashrpc.server.services.jobs import JobService
from bashrpc.server.services.request import Caller, Command, Services
from bashrpc.server.services.tool import jobtools, jobview
from bashrpc.server.services.tool.inputrequired import Asking


def _exit_code(result: CallToolResult) -> int | None:
    structured = result.structured_content
    return None if structured is None else structured.exit_code


async def serve(
    caller: Caller,
    services: Services,
    planned: Command[CallToolResult],
    jobs: JobService,
    asking: Asking | None = None,
) -> CallToolResult:
    """The call run to its end, or answered when its command first waits: its
    user asked (`input_required`) when the client can ask and it is no secret."""
    spec = planned.spec

    def adopt(hold: Hold) -> Job | None:
        return jobs.adopt(hold, spec.command, spec.cwd, announce=False)

    done = await held.serve(caller, services, planned, _exit_code, adopt)
    if not isinstance(done, held.Adopted):
        return done
    job, wait = done.job, done.wait
    if asking is not None and not wait.secret:
        return asking.ask(job, wait)
    # The model has read what the answer shows; `bash_output` goes on from there.
    jobview.of(job).cursor = done.shown
    template = messages.TOOL_WAITS_FOR_SECRET if wait.secret else messages.TOOL_WAITS_FOR_INPUT
    notice = template.format(prompt=jobtools.quoted_prompt(wait.prompt), terminal_id=job.id)
    text = done.so_far.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        text += "\n"
    return jobtools.text_result(text + notice)
