"""bashrpc runtime: the stdio JSON-RPC server and its shells.

The packages, and what each may import (tests/unit/test_architecture.py
checks the graph, one row per folder):

- `surfaces/`: the methods clients call, as thin adapters: params in,
  listener events out, results shaped. They use `services`, `connection`
  (the request context) and `wire.registry`; never `runtime` or `output`,
  and never each other.
- `services/`: what the surfaces ask of the runtime: the one command
  service under both `bash` and `tools/call`, sessions, resumable requests.
  `services/tool/` is the model's tool call on top of it (normalize,
  intercept, shape), which the command service never imports.
- `runtime/`: processes, in folders with one job each: `seam/` (what a
  backend is), `sessions/`, `run/` (one command for a request), `shell/`,
  `pty/`, `sandbox/`, `containment/`, and `local/` (the backend of this
  machine); `runtime.py` joins them. `output/`: what happens to bytes a
  command prints: sanitize, sink, artifacts, chunk streams.
- `connection.py` and `wire/`: one client's request loop, framing, the
  outbox, dispatch and the error map. `serve.py` owns the process: stdio,
  signals, the watchdog, and the task groups.
- `daemon/`: `bashrpc daemon`, many connections on a socket (and a
  WebSocket listener) in one guarded process, with tenants whose sessions
  outlive a connection; and `bashrpc attach`, the stdio bridge to it.
- `cli/`: the command line and the `exec` client.

Imports point one way: surfaces -> services -> runtime/output -> protocol.
"""
