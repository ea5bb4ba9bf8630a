"""Containment: which processes belong to a shell, and how they all die.

The process table (/proc) and signals, cgroup v2 groups, polling for what the
kernel does not announce, children that die with the server, and the watchdog
that outlives it. Imports nothing else of the runtime."""
