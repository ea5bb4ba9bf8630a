"""The wire: bytes in and out, framing, the outbox, dispatch and the error map.

It knows JSON-RPC and nothing of shells. Imports: `protocol`, `server.errors`,
`server.log`, `server.fdio`.
"""
