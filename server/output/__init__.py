"""What happens to the bytes a command prints: sanitized, bounded in memory,
kept whole in artifacts, and streamed as notifications. Pure where it can be
(sanitize, sink, utf8); `artifacts` touches files. Imports: `protocol`,
`bashrpc.server.log`.
"""
