"""One persistent shell and its wire: the bash process, what it is sent and
what it reports (the protocol, pure), the control pipe, the status and
output FIFOs, one command's run on it, and how long to drain after it."""
