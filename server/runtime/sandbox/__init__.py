"""The sandbox: the bubblewrap policy a shell runs under, bwrap's launch and
probe, the seccomp filter, and the git guard (its rules, the scan that finds
the git dirs, and git's config reader). Imports nothing else of the runtime."""
