"""The deploy recipes: the manifests' check, and `deploy/check` run for real."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def manifests() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manifests", DEPLOY / "manifests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_manifests_pass() -> None:
    checked, problems = manifests().check(sorted((DEPLOY / "kubernetes").glob("*.yaml")))
    assert problems == []
    assert {c.split(": ")[1].split()[0] for c in checked} == {
        "Pod",
        "SandboxTemplate",
        "SandboxWarmPool",
        "SandboxClaim",
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("tty: false", "tty: true"), "asks for a tty"),
        (("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 10"), "grace"),
        (("stdinOnce: true", "stdinOnce: false"), "stdinOnce"),
        (("mountPath: /var/lib/bashrpc/artifacts", "mountPath: /data"), "/var/lib/bashrpc"),
    ],
)
def test_the_check_catches_what_breaks_bashrpc(
    tmp_path: Path, change: tuple[str, str], problem: str
) -> None:
    text = (DEPLOY / "kubernetes" / "session-pod.yaml").read_text()
    assert change[0] in text
    broken = tmp_path / "pod.yaml"
    broken.write_text(text.replace(change[0], change[1]))
    _, problems = manifests().check([broken])
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('"--stay", ', ""), "--stay"),
        (('"--socket", "/run/bashrpc/private/daemon.sock", ', ""), "--socket"),
    ],
)
def test_the_check_keeps_the_daemon_pod_reachable_and_up(
    tmp_path: Path, change: tuple[str, str], problem: str
) -> None:
    text = (DEPLOY / "kubernetes" / "daemon-pod.yaml").read_text()
    assert change[0] in text
    broken = tmp_path / "pod.yaml"
    broken.write_text(text.replace(change[0], change[1]))
    _, problems = manifests().check([broken])
    assert any(problem in p for p in problems), problems


PROBE_BREAKS = [
    ('"--http", "0.0.0.0:8081", ', "needs --http"),
    ('"0.0.0.0:8081"', "loopback"),
    ('"--http-open-probes"', "add --http-open-probes"),
    ("path: /readyz", "readinessProbe must be an httpGet of /readyz"),
    ("path: /livez", "livenessProbe must be an httpGet of /livez"),
    ("containerPort: 8081", "not on the --http port"),
    ('"--drain-seconds", "20"', "must be below the grace"),
    ('command: ["sleep", "3"]', "must be below the grace"),
    ("mountPath: /etc/bashrpc/token", "is on no volume"),
]
PROBE_FIXES = {
    '"0.0.0.0:8081"': '"127.0.0.1:8081"',
    '"--http-open-probes"': '"--stay"',
    "path: /readyz": "path: /metrics",
    "path: /livez": "path: /readyz",
    "containerPort: 8081": "containerPort: 9000",
    '"--drain-seconds", "20"': '"--drain-seconds", "29"',
    'command: ["sleep", "3"]': 'command: ["sleep", "15"]',
    "mountPath: /etc/bashrpc/token": "mountPath: /etc/elsewhere",
}


@pytest.mark.parametrize("recipe", ["daemon-pod.yaml", "warm-pool.yaml"])
@pytest.mark.parametrize(("change", "problem"), PROBE_BREAKS)
def test_the_check_keeps_a_daemons_probes_reachable_and_its_drain_in_the_grace(
    tmp_path: Path, recipe: str, change: str, problem: str
) -> None:
    text = (DEPLOY / "kubernetes" / recipe).read_text()
    assert change in text
    broken = tmp_path / recipe
    broken.write_text(text.replace(change, PROBE_FIXES.get(change, "")))
    _, problems = manifests().check([broken])
    assert any(problem in p for p in problems), problems


def test_a_claim_must_name_a_template(tmp_path: Path) -> None:
    text = (DEPLOY / "kubernetes" / "warm-pool.yaml").read_text()
    broken = tmp_path / "pool.yaml"
    broken.write_text(
        text.replace(
            "name: bashrpc\nspec:\n  replicas", "name: bashrpc\nspec:\n  replicas"
        ).replace(
            "  sandboxTemplateRef:\n    name: bashrpc\n  lifecycle",
            "  sandboxTemplateRef:\n    name: missing\n  lifecycle",
        )
    )
    _, problems = manifests().check([broken])
    assert any("refers to no SandboxTemplate" in p for p in problems), problems


@pytest.mark.slow
def test_deploy_check_runs_what_it_can_here() -> None:
    done = subprocess.run(
        [sys.executable, str(DEPLOY / "check")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("verified: 6 Kubernetes documents")
    assert lines[1].startswith(("verified: bundle", "skipped: bundle"))
    assert lines[2].startswith(("verified: image", "skipped: image"))
