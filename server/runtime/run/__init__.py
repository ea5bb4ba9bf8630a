"""Running one command for a request: the execution an abort reaches, the
request and its result, the runner on the session's shell and the runner on
a PTY (with its lane), and what one command may carry (its environment,
the kernel's exec limits)."""
