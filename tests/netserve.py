"""`bashrpc` with the tests' name mapping installed: `python -m tests.netserve
MAPPING.json -m bashrpc ARGS...`. The product has no way to take a mapping (no
setting, flag or variable): only code can install one, and this is that code."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from bashrpc.server.cli.main import main
from bashrpc.server.runtime.network import resolver


class Mapping(msgspec.Struct, frozen=True):
    names: dict[str, list[str]]
    # (address, port) presented to the proxy -> (host, port) it dials.
    routes: list[tuple[str, int, str, int]]

    def resolver(self) -> resolver.MappedResolver:
        routes = {(a, p): (h, q) for a, p, h, q in self.routes}
        return resolver.MappedResolver(dict(self.names), routes)


if __name__ == "__main__":
    mapping = msgspec.json.decode(Path(sys.argv[1]).read_bytes(), type=Mapping)
    resolver.install(mapping.resolver())
    assert sys.argv[2:4] == ["-m", "bashrpc"], sys.argv
    sys.argv = ["bashrpc", *sys.argv[4:]]
    sys.exit(main())
