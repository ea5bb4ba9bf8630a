"""Running one command for a request: the execution an abort reaches, the
runner on the session's shell and the runner on a PTY (with its lane), and
what one command may carry (its environment, the kernel's exec limits).

The records of one command, in the order it makes them:

- `CommandSpec` (`services/commands.py`): what a surface asks to run, with
  its limits and where its fields sit in the request.
- `Execution` (`runners.py`): what a runner runs, where its bytes go, and the
  scope an abort or the deadline cancels; findable by request and session.
- `CommandRun` (`shell/command.py`): its run on a persistent shell, which
  reports a `StatusRecord` (`shell/protocol.py`) on the status FIFO.
- `Completion` (`seam/shelltypes.py`): how it ended on the shell, as any
  backend reports it.
- `RunResult` (`runners.py`): how the run ended for the request: timed out,
  killed, a PTY that never started, the shell's state lost, a directory not
  entered.
- `Outcome` (`services/outcome.py`): that, with the output's summary and its
  artifact, which each surface shapes: `BashResult` for `bash`, a
  `CallToolResult` for `tools/call`.
"""
