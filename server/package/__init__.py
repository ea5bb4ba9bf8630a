"""bashrpc: a JSON-RPC 2.0 server on stdio that gives coding agents a bash tool.

One import package. In the repository it is three folders, mapped by
`pyproject.toml`: this one (the package's own files: `python -m bashrpc`,
`py.typed`, the JSON Schemas as `importlib.resources.files("bashrpc") /
"schemas"`), `server/` as `bashrpc.server` and `protocol/` as
`bashrpc.protocol`. A client imports `bashrpc.protocol` alone.
"""
