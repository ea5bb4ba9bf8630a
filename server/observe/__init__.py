"""What the process tells about itself: figures, probes and traces.

Pure counting (`stats`), their Prometheus form (`prometheus`, an optional
extra), HTTP probes (`httpwire`, the sans-I/O half of the daemon's `--http`),
and opt-in request spans (`traces`). Imports: `protocol`, `bashrpc.server.log`.
"""
