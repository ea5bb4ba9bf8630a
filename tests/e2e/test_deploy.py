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
