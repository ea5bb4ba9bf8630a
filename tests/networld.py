"""The world the network allowlist's tests reach: servers on the host's loopback
(plain HTTP, and HTTPS with a test CA made here with openssl) presented to the
proxy under allowed names and a global address (the tests' resolver mapping,
`tests/netserve.py`), with what real clients fetch: a file, a git repository
(dumb HTTP), a Python package index and an npm registry."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import os
import ssl
import subprocess
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import msgspec

# Where every name is said to be: a global address nothing here dials.
PRESENTED = "93.184.216.34"
ALLOWED = (
    "plain.example.org",
    "files.example.org",
    "git.example.org",
    "pypi.example.org",
    "npm.example.org",
    "*.cdn.example.org",
    "local.example.org",
    "intranet.example.org",
    "meta.example.org",
)
DENIED = ("blocked.cdn.example.org",)
TLS_NAMES = ("files.example.org", "git.example.org", "pypi.example.org", "npm.example.org")
# Names that resolve to what must stay unreachable, though allowed by name.
SPECIAL = {
    "local.example.org": "127.0.0.1",
    "intranet.example.org": "10.0.0.5",
    "meta.example.org": "169.254.169.254",
}
OTHER_NAMES = (
    "evil.example.net",
    "cdn.example.org",
    "a.cdn.example.org",
    "blocked.cdn.example.org",
    "evilcdn.example.org",
    "a.cdn.example.org.evil.net",
)
HELLO = "hello from the allowlist\n"
PACKAGE = "tinypkg"


def network_settings(extra: str = "") -> str:
    """`[sandbox.network]`, allowing the world's names (after `[sandbox]`'s mode)."""
    allow = ", ".join(f'"{name}"' for name in ALLOWED)
    deny = ", ".join(f'"{name}"' for name in DENIED)
    return f'[sandbox.network]\nmode = "allowlist"\nallow = [{allow}]\ndeny = [{deny}]\n{extra}'


def settings(mode: str, extra: str = "") -> str:
    return f'[sandbox]\nmode = "{mode}"\n' + network_settings(extra)


# The checkout, where `python -m tests.netserve` is found.
ROOT = Path(__file__).resolve().parents[1]


def netserve_env() -> dict[str, str]:
    """What a server launched by `tests.netserve` adds to its environment: the
    checkout on its path, before the caller's own (a tool of the tests' may be
    there: `tests/late`)."""
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), *([inherited] if inherited else [])])}


class _Handler(http.server.SimpleHTTPRequestHandler):
    # Set per server: when each /slow response began, and when its client went.
    slow: SlowLog

    def do_GET(self) -> None:
        if self.path == "/slow":
            self._slow()
            return
        if self.path.startswith("/echo"):
            body = f"host={self.headers.get('Host')} path={self.path}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.split("?")[0] == f"/{PACKAGE}":
            self.path = "/npm/packument.json"
        super().do_GET()

    def _slow(self) -> None:
        """A byte every tenth of a second for a minute, or until the client is gone."""
        self.send_response(200)
        self.end_headers()
        self.slow.started.append(time.monotonic())
        try:
            for _ in range(600):
                self.wfile.write(b".")
                time.sleep(0.1)
        except OSError:
            self.slow.ended.append(time.monotonic())

    def log_message(self, format: str, *args: object) -> None:
        pass


class SlowLog:
    def __init__(self) -> None:
        self.started: list[float] = []
        self.ended: list[float] = []


class World:
    """The servers and files, made in `base` (readable by every user)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.site = base / "site"
        self.site.mkdir(parents=True)
        (self.site / "hello.txt").write_text(HELLO)
        self.ca = base / "ca.pem"
        self._certificates()
        self._git()
        self._index()
        self._npm()
        self.servers: list[http.server.ThreadingHTTPServer] = []
        self.slow = SlowLog()
        self.http_port = self._serve(None)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(base / "server.pem", base / "server.key")
        self.https_port = self._serve(context)
        self.mapping = base / "mapping.json"
        self.mapping.write_bytes(msgspec.json.encode(self._mapping()))
        for path in (base, *base.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)

    def _mapping(self) -> dict[str, object]:
        names = {name: [PRESENTED] for name in (*ALLOWED, *OTHER_NAMES) if "*" not in name}
        names.update({name: [address] for name, address in SPECIAL.items()})
        routes = [
            (PRESENTED, 80, "127.0.0.1", self.http_port),
            (PRESENTED, 443, "127.0.0.1", self.https_port),
        ]
        return {"names": names, "routes": routes}

    def _run(self, *argv: str) -> None:
        subprocess.run(argv, cwd=self.base, check=True, capture_output=True, timeout=60)

    def _certificates(self) -> None:
        curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        self._run(
            "openssl",
            "req",
            "-x509",
            *curve,
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=bashrpc test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
        self._run(
            "openssl",
            "req",
            *curve,
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            f"/CN={TLS_NAMES[0]}",
        )
        sans = ",".join(f"DNS:{name}" for name in TLS_NAMES)
        (self.base / "ext.cnf").write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n")
        self._run(
            "openssl",
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        )

    def _git(self) -> None:
        work = self.base / "gitwork"
        work.mkdir()
        env = ("-c", "user.name=t", "-c", "user.email=t@example.org")
        self._run("git", "init", "-q", "-b", "main", str(work))
        (work / "README").write_text("cloned through the proxy\n")
        self._run("git", "-C", str(work), "add", "README")
        self._run("git", *env, "-C", str(work), "commit", "-q", "-m", "first")
        self._run("git", "clone", "-q", "--bare", str(work), str(self.site / "repo.git"))
        self._run("git", "-C", str(self.site / "repo.git"), "update-server-info")

    def _index(self) -> None:
        wheel = f"{PACKAGE}-1.0-py3-none-any.whl"
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w") as z:
            z.writestr(f"{PACKAGE}/__init__.py", "VALUE = 1\n")
            info = f"{PACKAGE}-1.0.dist-info"
            z.writestr(
                f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n"
            )
            z.writestr(
                f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            z.writestr(f"{info}/RECORD", "")
        packages = self.site / "packages"
        packages.mkdir()
        (packages / wheel).write_bytes(data.getvalue())
        digest = hashlib.sha256(data.getvalue()).hexdigest()
        project = self.site / "simple" / PACKAGE
        project.mkdir(parents=True)
        link = f'<a href="../../packages/{wheel}#sha256={digest}">{wheel}</a>'
        (project / "index.html").write_text(f"<html><body>{link}</body></html>")

    def _npm(self) -> None:
        data = io.BytesIO()
        manifest = json.dumps({"name": PACKAGE, "version": "1.0.0"}).encode()
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            info = tarfile.TarInfo("package/package.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
        tarball = data.getvalue()
        npm = self.site / "npm"
        npm.mkdir()
        name = f"{PACKAGE}-1.0.0.tgz"
        (npm / name).write_bytes(tarball)
        packument = {
            "name": PACKAGE,
            "dist-tags": {"latest": "1.0.0"},
            "versions": {
                "1.0.0": {
                    "name": PACKAGE,
                    "version": "1.0.0",
                    "dist": {
                        "tarball": f"https://npm.example.org/npm/{name}",
                        "shasum": hashlib.sha1(tarball).hexdigest(),
                    },
                }
            },
        }
        (npm / "packument.json").write_text(json.dumps(packument))

    def _serve(self, context: ssl.SSLContext | None) -> int:
        # This world's handler: its slow log, its site.
        kind = type("Handler", (_Handler,), {"slow": self.slow})
        handler = functools.partial(kind, directory=str(self.site))

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        if context is not None:
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return int(server.server_address[1])

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def world(base: Path) -> Iterator[World]:
    made = World(base)
    try:
        yield made
    finally:
        made.stop()
