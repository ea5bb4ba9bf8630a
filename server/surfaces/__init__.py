"""The methods clients call, as thin adapters: params in, listener events
out, results shaped. Each module registers its methods with a `Registry`.
Imports: `services`, `connection` (the request context), `wire.registry`,
`protocol`; never `runtime` or `output`, and never one another.
"""
