"""The wire: bytes in and out, framing, the outbox, dispatch and the error map.

It knows JSON-RPC and nothing of shells. Imports: `protocol`, `bashrpc.server.errors`,
`bashrpc.server.log`, `bashrpc.server.fdio`.
"""
