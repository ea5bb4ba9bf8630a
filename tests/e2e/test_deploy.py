"""The deploy recipes: the manifests' check, and `deploy/check` run for real."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
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


# A podman that builds nothing and runs a stand-in of the image's server: it
# runs the probe while its input is open and cancels it on EOF, as bashrpc
# does. Each call is logged, and so is whether the probe ran.
STUB_PODMAN = """#!{python}
import json, os, select, sys, time
mode = os.environ["STUB_PODMAN_MODE"]
log = open(os.environ["STUB_PODMAN_LOG"], "a")
args = sys.argv[1:]
log.write(json.dumps(args) + "\\n")
if args[0] == "build":
    sys.exit(0)
if "--entrypoint" in args:
    if mode == "cannot-run":
        print("Error: starting container: crun: setrlimit `RLIMIT_NOFILE`:", file=sys.stderr)
        print("crun: setrlimit RLIMIT_NOFILE: Operation not permitted", file=sys.stderr)
        sys.exit(126)
    sys.exit(0)
request = json.loads(sys.stdin.readline())
time.sleep(0.5)
closed = bool(select.select([sys.stdin], [], [], 0)[0]) and sys.stdin.read(1) == ""
uid = "0" if mode == "root" else "1000"
if closed or mode == "cancelled":
    log.write("probe cancelled\\n")
    result = dict(output="PATH=/usr/bin\\n", exitCode=None, cancelled=True, timedOut=False)
else:
    log.write("probe ran\\n")
    output = f"PATH=/usr/bin\\nHOME=/home/agent\\n/usr/bin/python3\\n{{uid}}\\n"
    result = dict(output=output, exitCode=0, cancelled=False, timedOut=False)
print(json.dumps(dict(jsonrpc="2.0", id=request["id"], result=result)), flush=True)
sys.stdin.read()
"""
LOCAL_BASE = "localhost/bookworm-python"


def _check_image_with_stub(
    tmp_path: Path, mode: str, wheels: Path | None = None, given: bool = True
) -> tuple[subprocess.CompletedProcess[str], str]:
    """deploy/check's image part with the stub podman, run from a copy of
    deploy/ (its project is tmp_path/project): it never touches the checkout's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "podman"
    stub.write_text(STUB_PODMAN.format(python=sys.executable))
    stub.chmod(0o755)
    project = tmp_path / "project"
    if not (project / "deploy").exists():
        shutil.copytree(DEPLOY, project / "deploy", ignore=shutil.ignore_patterns("wheels"))
    if wheels is None:
        wheels = tmp_path / "wheels"
        wheels.mkdir()
    log = tmp_path / "podman.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_PODMAN_MODE": mode,
        "STUB_PODMAN_LOG": str(log),
    }
    argv = [sys.executable, str(project / "deploy" / "check"), "--only", "image"]
    argv += ["--base", LOCAL_BASE, *(["--wheels", str(wheels)] if given else [])]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return done, log.read_text() if log.exists() else ""


def _project_with_wheels(tmp_path: Path) -> Path:
    """A copy of deploy/ whose deploy/wheels holds a wheel, as the README has one build it."""
    wheels = tmp_path / "project" / "deploy" / "wheels"
    shutil.copytree(DEPLOY, wheels.parent, ignore=shutil.ignore_patterns("wheels"))
    wheels.mkdir()
    (wheels / "bashrpc-0-py3-none-any.whl").write_bytes(b"a wheel the user built")
    return wheels


@pytest.mark.parametrize("given", [True, False])
def test_the_check_keeps_the_wheels_folder_the_readme_has_you_build(
    tmp_path: Path, given: bool
) -> None:
    wheels = _project_with_wheels(tmp_path)
    done, _ = _check_image_with_stub(tmp_path, "good", wheels=wheels, given=given)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.startswith("verified: image"), done.stdout
    assert [p.name for p in wheels.iterdir()] == ["bashrpc-0-py3-none-any.whl"]


def test_wheels_from_elsewhere_leave_a_built_wheels_folder_alone(tmp_path: Path) -> None:
    wheels = _project_with_wheels(tmp_path)
    done, _ = _check_image_with_stub(tmp_path, "good")
    assert done.returncode == 1
    assert f"deploy/wheels already holds wheels: pass --wheels {wheels}" in done.stderr
    assert "Traceback" not in done.stderr
    assert [p.name for p in wheels.iterdir()] == ["bashrpc-0-py3-none-any.whl"]
    assert not (tmp_path / "podman.log").exists()


def test_wheels_copied_in_are_taken_away_after_the_build(tmp_path: Path) -> None:
    done, _ = _check_image_with_stub(tmp_path, "good")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "project" / "deploy" / "wheels").exists()


def test_the_image_check_waits_for_the_probe_and_builds_on_a_local_base(tmp_path: Path) -> None:
    done, log = _check_image_with_stub(tmp_path, "good")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("verified: image"), done.stdout
    assert "probe ran" in log
    build = json.loads(log.splitlines()[0])
    assert build[0] == "build" and "--network=none" in build
    assert ["--build-arg", f"BASE={LOCAL_BASE}"] == build[build.index("--build-arg") :][:2]
    assert "--pull=never" in build


@pytest.mark.parametrize(
    ("mode", "problem"),
    [("cancelled", "the probe did not run to its end"), ("root", "the server runs as root")],
)
def test_a_wrong_answer_fails_the_image_check(tmp_path: Path, mode: str, problem: str) -> None:
    done, _ = _check_image_with_stub(tmp_path, mode)
    assert done.returncode == 1
    assert problem in done.stderr
    assert "verified" not in done.stdout


def test_where_podman_cannot_run_a_container_the_check_says_why_in_one_line(
    tmp_path: Path,
) -> None:
    done, _ = _check_image_with_stub(tmp_path, "cannot-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "skipped: image (podman cannot run a container here: "
        "crun: setrlimit RLIMIT_NOFILE: Operation not permitted)"
    ]
