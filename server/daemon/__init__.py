"""`bashrpc daemon`: one process serving many connections on a unix socket, and
`bashrpc attach`, the stdio bridge a launcher runs to reach it."""
