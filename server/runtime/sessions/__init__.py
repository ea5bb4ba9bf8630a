"""Sessions and the shells they keep: a session's name, configuration and
directory, and the pool that starts, leases, evicts and closes its shells
under the server's limits."""
