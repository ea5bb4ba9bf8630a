"""Check deploy/kubernetes without a cluster: each YAML document loads, has the
fields its kind needs, and keeps bashrpc's own rules (stdio never on a terminal,
a drain shorter than the grace period, artifacts on a volume, references that
resolve; a pod in the daemon form names its socket, stays up between hosts, and is
probed over its --http with a drain that fits the grace period).

    python3 deploy/manifests.py [FILE ...]    (default: every deploy/kubernetes/*.yaml)

Prints one line per document checked; exits 1 with the problems otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ARTIFACTS_MOUNT = "/var/lib/bashrpc/artifacts"
POD_KINDS = {"Pod"}
TEMPLATE_KINDS = {"SandboxTemplate"}
REFERRING_KINDS = {"SandboxClaim", "SandboxWarmPool"}
KNOWN_API_VERSIONS = {
    "Pod": "v1",
    "SandboxTemplate": "extensions.agents.x-k8s.io/v1alpha1",
    "SandboxClaim": "extensions.agents.x-k8s.io/v1alpha1",
    "SandboxWarmPool": "extensions.agents.x-k8s.io/v1alpha1",
}


def _flag(args: list[str], name: str) -> float | None:
    return float(args[args.index(name) + 1]) if name in args else None


def check_pod_spec(spec: dict[str, Any], where: str, *, stdio: bool) -> list[str]:
    problems = []
    containers = spec.get("containers") or []
    if not containers:
        problems.append(f"{where}: no containers")
    for c in [*containers, *(spec.get("initContainers") or [])]:
        if not c.get("name") or not c.get("image"):
            problems.append(f"{where}: a container without name or image")
        if c.get("tty"):
            problems.append(f"{where}: container {c.get('name')} asks for a tty")
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    for c in containers:
        for mount in c.get("volumeMounts") or []:
            if mount["name"] not in volumes:
                problems.append(f"{where}: mount of an undeclared volume {mount['name']}")
    mounted = {m["mountPath"] for c in containers for m in c.get("volumeMounts") or []}
    if ARTIFACTS_MOUNT not in mounted:
        problems.append(f"{where}: no volume at {ARTIFACTS_MOUNT}")
    main = containers[0] if containers else {}
    args = [str(a) for a in main.get("args") or []]
    if args[:1] == ["daemon"]:
        if "--socket" not in args:
            problems.append(f"{where}: a daemon pod must name its --socket (attach's target)")
        if "--stay" not in args:
            problems.append(f"{where}: a daemon pod needs --stay, or it ends when idle")
        problems += check_probes(spec, main, args, where)
    elif stdio:
        if not (main.get("stdin") and main.get("stdinOnce")):
            problems.append(f"{where}: stdio needs stdin and stdinOnce")
        if "activeDeadlineSeconds" not in spec:
            problems.append(f"{where}: no activeDeadlineSeconds")
        drain = _flag(args, "--drain-seconds")
        grace = spec.get("terminationGracePeriodSeconds")
        if drain is None or grace is None or not drain < grace:
            problems.append(f"{where}: --drain-seconds must be set below the grace period")
    return problems


def _http_port(args: list[str]) -> int | None:
    if "--http" not in args:
        return None
    return int(args[args.index("--http") + 1].rsplit(":", 1)[1])


def _probe_port(probe: dict[str, Any], container: dict[str, Any]) -> int | None:
    """The port an httpGet probe knocks on, a named port resolved."""
    port = (probe.get("httpGet") or {}).get("port")
    if isinstance(port, int):
        return port
    named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
    found = named.get(port)
    return found if isinstance(found, int) else None


def check_probes(
    spec: dict[str, Any], container: dict[str, Any], args: list[str], where: str
) -> list[str]:
    """A daemon is probed over its --http: /readyz for readiness, /livez for
    liveness, reachable by a kubelet, and its drain fits in the grace period
    after the preStop wait."""
    port = _http_port(args)
    if port is None:
        return [f"{where}: a daemon pod needs --http HOST:PORT for its probes"]
    problems = []
    host = args[args.index("--http") + 1].rsplit(":", 1)[0]
    if host.startswith("127.") or host == "localhost":
        problems.append(f"{where}: --http on loopback cannot be reached by the kubelet's probes")
    elif "--http-open-probes" not in args:
        problems.append(f"{where}: a kubelet's httpGet sends no token: add --http-open-probes")
    for kind, paths in (
        ("readinessProbe", ("/readyz", "/v1/health")),
        ("livenessProbe", ("/livez",)),
    ):
        probe = container.get(kind) or {}
        path = (probe.get("httpGet") or {}).get("path")
        if path not in paths:
            problems.append(f"{where}: {kind} must be an httpGet of {paths[0]}")
        elif _probe_port(probe, container) != port:
            problems.append(f"{where}: {kind} is not on the --http port {port}")
    token = args[args.index("--token-file") + 1] if "--token-file" in args else None
    mounts = [m["mountPath"] for m in container.get("volumeMounts") or []]
    if token is not None and not any(token.startswith(m.rstrip("/") + "/") for m in mounts):
        problems.append(f"{where}: the --token-file {token} is on no volume")
    drain = _flag(args, "--drain-seconds")
    grace = spec.get("terminationGracePeriodSeconds")
    wait = _pre_stop_sleep(container)
    if drain is None or grace is None or not wait + drain < grace:
        problems.append(f"{where}: preStop's wait plus --drain-seconds must be below the grace")
    return problems


def _pre_stop_sleep(container: dict[str, Any]) -> float:
    command = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
    argv = [str(a) for a in command.get("command") or []]
    return float(argv[1]) if argv[:1] == ["sleep"] and len(argv) == 2 else 0.0


def check(paths: list[Path]) -> tuple[list[str], list[str]]:
    """(documents checked, problems)."""
    checked: list[str] = []
    problems: list[str] = []
    templates: set[str] = set()
    references: list[tuple[str, str]] = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            kind = doc.get("kind")
            name = (doc.get("metadata") or {}).get("name")
            where = f"{path.name}: {kind} {name}"
            if not name or kind not in KNOWN_API_VERSIONS:
                problems.append(f"{where}: no name, or an unknown kind")
                continue
            if doc.get("apiVersion") != KNOWN_API_VERSIONS[kind]:
                problems.append(f"{where}: apiVersion is not {KNOWN_API_VERSIONS[kind]}")
            spec = doc.get("spec") or {}
            if kind in POD_KINDS:
                problems += check_pod_spec(spec, where, stdio=True)
            elif kind in TEMPLATE_KINDS:
                templates.add(name)
                pod = (spec.get("podTemplate") or {}).get("spec") or {}
                problems += check_pod_spec(pod, where, stdio=False)
            elif kind in REFERRING_KINDS:
                ref = (spec.get("sandboxTemplateRef") or {}).get("name")
                references.append((where, ref))
            checked.append(where)
    for where, ref in references:
        if ref not in templates:
            problems.append(f"{where}: refers to no SandboxTemplate here ({ref})")
    return checked, problems


def main() -> int:
    paths = [Path(p) for p in sys.argv[1:]] or sorted((HERE / "kubernetes").glob("*.yaml"))
    checked, problems = check(paths)
    for where in checked:
        print(f"checked {where}")
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
