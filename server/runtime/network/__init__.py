"""The sandbox's network allowlist: the rules (pure), the proxy's parsers (pure),
the proxy a session's sandboxes reach through a listener made in each one."""
