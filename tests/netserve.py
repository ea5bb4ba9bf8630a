"""`bashrpc` with the tests' name mapping installed: `python -m tests.netserve
MAPPING.json [PYTHON] -m bashrpc ARGS...` (a launcher's interpreter, if any, is
passed over). The product has no way to take a mapping (no
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
    at = next(i for i in range(2, len(sys.argv) - 1) if sys.argv[i : i + 2] == ["-m", "bashrpc"])
    sys.argv = ["bashrpc", *sys.argv[at + 2 :]]
    sys.exit(main())
