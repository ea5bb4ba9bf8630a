"""Processes: sessions and their shells, PTY commands, containment, the rc snapshot.

Everything that forks, execs, signals or reads /proc lives here. Imports:
`protocol`, and from `bashrpc.server`: `errors`, `settings`, `log`, `fdio`,
and `output` for what commands print.
"""
