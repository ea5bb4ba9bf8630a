"""The seam between the runtime and where commands run: what a backend is
(shells, PTY programs and background programs, and questions about their
filesystem), and the types that cross it. The pool, the runners and the
services see a backend only through these."""
