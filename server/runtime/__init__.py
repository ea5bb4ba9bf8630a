"""Processes: sessions and their shells, PTY commands, containment, the rc snapshot.

Everything that forks, execs, signals or reads /proc lives here. Imports:
`protocol`, `server.errors`, `server.settings`, `server.log`, `server.fdio`,
and `output` for what commands print.
"""
