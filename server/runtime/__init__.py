"""Processes: sessions and their shells, PTY commands, the sandbox, containment.

Everything that forks, execs, signals or reads /proc lives here, in folders
with one job each; imports point down this list, never back up:

- `runtime.py`: one server's runtime, joining the folders below.
- `run/`: one command for a request, on a session's shell or on a PTY.
- `sessions/`: sessions and the pool of their shells. `jobs/`: background
  jobs, whose programs the backend starts.
- `local/`: the backend of this machine, and the rc snapshot it replays.
- `shell/`: one persistent shell and its wire. `pty/`: one program on a terminal.
- `seam/`: what a backend is, and the types that cross it; it imports no
  implementation.
- `sandbox/`: bubblewrap, seccomp, the git guard. `containment/`: which
  processes belong to a shell, and how they all die.

From `bashrpc.server` they import `errors`, `settings`, `log`, `fdio`, and
`output` for what commands print.
"""
