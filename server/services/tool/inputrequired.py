"""A tool call whose command waits for input, for a 2026-07-28 client that can ask
its user (it declares elicitation): answered `input_required`.

The call's command goes on as a job, as for any client (`waits`); rather than
tell the model, the result asks the user through the client: one form
elicitation (`inputRequests`, under `INPUT_KEY`) whose message is the prompt,
and a sealed `requestState` naming the job (`requeststate`). The client sends
the same call again with the answer and the state: the answer is typed into the
job, and the call answers with what it brings, the command's end as a tool
result, or `input_required` again at its next prompt. A declined answer stops
the job. A secret prompt is never put in a form (MCP forbids it): the model's
text says only the user may answer, as for any client.
"""

from __future__ import annotations

from bashrpc.protocol import messages
from bashrpc.protocol.mcp import (
    CallToolResult,
    ElicitParams,
    FormField,
    FormSchema,
    InputRequest,
    ToolsCallParams,
)
from bashrpc.server import errors
from bashrpc.server.runtime.jobs.job import Job
from bashrpc.server.runtime.seam.backend import InputWait
from bashrpc.server.services.jobs import JobService
from bashrpc.server.services.tool import jobtools, jobview, requeststate
from bashrpc.server.services.tool.finish import tool_error
from bashrpc.server.services.tool.plan import TOOL_SESSION_ID
from bashrpc.server.services.tool.requeststate import Sealer

# The one input request's key, and its one field.
INPUT_KEY = "input"
ANSWER_FIELD = "answer"


class Asking:
    """One call of one tenant, able to ask its user; sealed with `sealer`."""

    def __init__(self, params: ToolsCallParams, tenant: str | None, sealer: Sealer) -> None:
        self._call = requeststate.call_digest(params.name, bytes(params.arguments))
        self._tenant = tenant
        self._sealer = sealer

    def ask(self, job: Job, wait: InputWait) -> CallToolResult:
        """The user asked the job's prompt; the model will read the whole output
        once the command ends."""
        jobview.of(job).cursor = 0
        prompt = jobtools.quoted_prompt(wait.prompt)
        command = job.spec.command
        if len(command) > messages.JOB_COMMAND_SHOWN_CHARS:
            command = command[: messages.JOB_COMMAND_SHOWN_CHARS - 3] + "..."
        field = FormField(
            type="string",
            title=messages.ELICIT_FIELD_TITLE,
            description=messages.ELICIT_FIELD_DESCRIPTION,
        )
        form = FormSchema(properties={ANSWER_FIELD: field}, required=[ANSWER_FIELD])
        message = messages.ELICIT_MESSAGE.format(command=command, prompt=prompt)
        request = InputRequest(
            method="elicitation/create",
            params=ElicitParams(message=message, requested_schema=form),
        )
        return CallToolResult(
            input_requests={INPUT_KEY: request},
            request_state=self._sealer.seal(self._tenant, self._call, job.id, wait.since),
        )

    async def resume(
        self, params: ToolsCallParams, jobs: JobService, max_bytes: int
    ) -> CallToolResult:
        """The call sent again with its user's answer: typed into its job, then what
        it brings (InvalidArgument when the state may not be taken)."""
        assert params.request_state is not None
        state = self._sealer.open(params.request_state, self._tenant, self._call)
        response = (params.input_responses or {}).get(INPUT_KEY)
        answer = None if response is None else response.elicited()
        if answer is None:
            raise errors.InvalidArgument(messages.REQUEST_STATE_NO_ANSWER.format(key=INPUT_KEY))
        try:
            job = jobs.job(TOOL_SESSION_ID, state.job)
        except errors.NoSuchTerminal:
            return tool_error(messages.NO_SUCH_TERMINAL.format(terminal_id=state.job))
        if answer.action != "accept":
            await jobs.kill(job)
            result = jobtools.report(job, max_bytes)
            result.is_error = True
            return jobtools.with_job_ends(
                result, [messages.INPUT_DECLINED.format(terminal_id=job.id)]
            )
        wait = job.input_wait
        if wait is None or wait.since != state.asked:
            # Its prompt was answered another way (or the job ended): the answer
            # would land in whatever the job reads next.
            return self._unanswered(job, max_bytes)
        text = (answer.content or {}).get(ANSWER_FIELD, "")
        refused = await jobtools.type_into(job, str(text), enter=True)
        if refused is not None:
            return refused
        return self.after_answer(job, max_bytes)

    def _unanswered(self, job: Job, max_bytes: int) -> CallToolResult:
        """The job's next prompt asked, or how it stands, saying the answer was not typed."""
        result = self.after_answer(job, max_bytes)
        if result.request_state is not None:
            return result
        notice = messages.INPUT_ANSWER_STALE.format(terminal_id=job.id)
        return jobtools.with_job_ends(result, [notice])

    def after_answer(self, job: Job, max_bytes: int) -> CallToolResult:
        """The job's next prompt asked again, or how it stands for the model."""
        wait = job.input_wait
        if wait is not None and not wait.secret and not job.exited.is_set():
            return self.ask(job, wait)
        return jobtools.report(job, max_bytes)


def unexpected(params: ToolsCallParams) -> bool:
    """A call that carries an answer it cannot take (not a modern call of bash)."""
    answering = params.request_state is not None or params.input_responses is not None
    return answering and not (params.modern and params.wants_elicitation)
