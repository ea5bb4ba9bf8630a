"""bashrpc runtime: the stdio JSON-RPC server and its shells.

The packages, and what each may import (a test checks the graph):

- `surfaces/`: the methods clients call, as thin adapters: params in,
  listener events out, results shaped. They use `services`, `connection`
  (the request context) and `wire.registry`; never `runtime` or `output`,
  and never each other.
- `services/`: what the surfaces ask of the runtime: the one command
  service under both `bash` and `tools/call`, sessions, artifacts, and the
  tool-call steps (normalize, intercept, shape).
- `runtime/`: processes: sessions and their shells, PTYs, containment, the
  rc snapshot. `output/`: what happens to bytes a command prints: sanitize,
  sink, artifacts, chunk streams.
- `connection.py` and `wire/`: one client's request loop, framing, the
  outbox, dispatch and the error map. `serve.py` owns the process: stdio,
  signals, the watchdog, and the task groups.
- `cli/`: the command line and the `exec` client.

Imports point one way: surfaces -> services -> runtime/output -> protocol.
"""
