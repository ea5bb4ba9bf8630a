"""Where the runtime finds a backend by name: `local` here, and any other
registered the same way (a test's fake backend registers itself on import).
"""

from __future__ import annotations

from bashrpc.server.runtime.local.backend import LocalBackend
from bashrpc.server.runtime.seam.backend import Backend, BackendFactory, BackendSetup

LOCAL = "local"

_factories: dict[str, BackendFactory] = {LOCAL: LocalBackend}


class UnknownBackend(Exception):
    pass


def register(name: str, factory: BackendFactory) -> None:
    """Make `factory` the backend of that name (a name registered twice is a bug)."""
    if _factories.get(name, factory) is not factory:
        raise ValueError(f"backend {name!r} is registered twice")
    _factories[name] = factory


def create(name: str, setup: BackendSetup) -> Backend:
    factory = _factories.get(name)
    if factory is None:
        raise UnknownBackend(name)
    return factory(setup)
