import pytest

from bashrpc.protocol import messages
from bashrpc.protocol.methods import SandboxMode
from bashrpc.server.errors import InvalidArgument
from bashrpc.server.runtime.sandbox import mounts
from bashrpc.server.runtime.sandbox.mounts import policy
from bashrpc.server.runtime.seam.policy import Policy
from bashrpc.server.services.denials import denial_notice, denied_path
from bashrpc.server.settings import tightened

WORKSPACE = "/work/app"


def make(mode: str, **kw: object) -> Policy:
    made = policy(
        mode,  # type: ignore[arg-type]
        network=bool(kw.get("network", False)),
        workspace=WORKSPACE,
        writable_roots=kw.get("roots", ()),  # type: ignore[arg-type]
        protected_paths=kw.get("protected", ()),  # type: ignore[arg-type]
    )
    assert made is not None
    return made


def pairs(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == option]


def test_off_has_no_policy() -> None:
    assert (
        policy("off", network=False, workspace="/", writable_roots=(), protected_paths=()) is None
    )


def test_workspace_write_binds_roots_then_protects_inside_them() -> None:
    argv = mounts.argv(
        make("workspace-write", roots=["/usr/share", "/no/such/root"], protected=["secrets"]),
        ["bash"],
        cwd=WORKSPACE,
        bwrap="bwrap",
        private_dir="/run/s1",
    )
    assert argv[:4] == ["bwrap", "--die-with-parent", "--unshare-pid", "--new-session"]
    assert argv[-4:] == ["--chdir", WORKSPACE, "--", "bash"]
    assert "--unshare-net" in argv and pairs(argv, "--ro-bind")[0] == "/"
    assert pairs(argv, "--bind-try") == [WORKSPACE, "/usr/share"]
    # The shell's own directory is read-only: its FIFOs are the server's to make.
    assert pairs(argv, "--bind") == [] and "/run/s1" in pairs(argv, "--ro-bind")
    protected = pairs(argv, "--ro-bind-try")
    assert protected == [f"{WORKSPACE}/secrets", "/usr/share/secrets"]
    # Order matters: the private /tmp first, the roots over it, the protected over them.
    assert argv.index("/tmp") < argv.index(WORKSPACE) < argv.index(f"{WORKSPACE}/secrets")


def test_read_only_shows_the_roots_read_only_and_full_binds_everything() -> None:
    argv = mounts.argv(make("read-only"), ["bash"], cwd=WORKSPACE, bwrap="bwrap")
    assert pairs(argv, "--bind") == [] and WORKSPACE in pairs(argv, "--ro-bind-try")
    full = mounts.argv(make("full"), ["bash"], cwd="/", bwrap="bwrap", new_session=False)
    assert pairs(full, "--bind") == ["/"] and "--unshare-net" not in full
    assert "--new-session" not in full and "--unshare-pid" in full
    networked = mounts.argv(make("workspace-write", network=True), ["bash"], cwd="/", bwrap="bwrap")
    assert "--unshare-net" not in networked


@pytest.mark.parametrize("mode", ["full", "workspace-write", "read-only"])
def test_every_mode_hides_the_runtime_directory_and_seals_the_shell(mode: SandboxMode) -> None:
    argv = mounts.argv(
        make(mode),
        ["/usr/bin/bash"],
        cwd="/",
        bwrap="bwrap",
        private_dir="/run/rt/s1",
        runtime_dir="/run/rt",
        overlays=[("/run/rt/sealed/0-bash", "/usr/bin/bash")],
    )
    # Over the host's (or the read-only) root: empty but for the shell's own, read-only.
    assert argv.index("/run/rt") < argv.index("/run/rt/s1")
    assert pairs(argv, "--tmpfs")[-1] == "/run/rt"
    assert "/run/rt/s1" in pairs(argv, "--ro-bind")
    # The execute-only copy is bound, read-only, over the program it copies, last.
    bound = len(argv) - 1 - argv[::-1].index("--ro-bind")
    assert argv[bound : bound + 3] == ["--ro-bind", "/run/rt/sealed/0-bash", "/usr/bin/bash"]


@pytest.mark.parametrize(
    ("mode", "path", "allowed"),
    [
        ("workspace-write", "/work/app/src/a.py", True),
        ("workspace-write", "/work/app", True),
        ("workspace-write", "/work/application", False),
        ("workspace-write", "/work/app/.git/hooks/pre-commit", False),
        ("workspace-write", "/work/app/.git/config", False),
        ("workspace-write", "/work/app/.git/HEAD", False),
        ("workspace-write", "/tmp/x", True),
        ("workspace-write", "/etc/passwd", False),
        ("read-only", "/work/app/a", False),
        ("read-only", "/tmp/a", True),
        ("full", "/etc/passwd", True),
    ],
)
def test_allows_write(mode: str, path: str, allowed: bool) -> None:
    assert mounts.allows_write(make(mode), path) is allowed


def test_with_git_commits_only_what_decides_what_git_runs_is_refused() -> None:
    committing = policy(
        "workspace-write",
        network=False,
        workspace=WORKSPACE,
        writable_roots=(),
        protected_paths=(),
        git_commits=True,
    )
    assert committing is not None
    assert mounts.allows_write(committing, "/work/app/.git/HEAD")
    assert not mounts.allows_write(committing, "/work/app/.git/hooks/pre-commit")
    assert not mounts.allows_write(committing, "/work/app/.git/commondir")


def test_a_request_only_tightens() -> None:
    assert tightened("off", None) == "off"
    assert tightened("off", "read-only") == "read-only"
    assert tightened("workspace-write", "workspace-write") == "workspace-write"
    with pytest.raises(InvalidArgument) as info:
        tightened("read-only", "workspace-write")
    assert info.value.detail == messages.SANDBOX_LOOSER.format(
        requested="workspace-write", configured="read-only"
    )


@pytest.mark.parametrize(
    ("output", "path"),
    [
        ("touch: cannot touch '/etc/x': Read-only file system\n", "/etc/x"),
        ("bash: /usr/local/bin/tool: Read-only file system\n", "/usr/local/bin/tool"),
        ("mkdir: cannot create directory ‘/opt/y’: Read-only file system\n", "/opt/y"),
        ("OSError: [Errno 30] Read-only file system: '/var/lib/z'\n", "/var/lib/z"),
        (
            "npm ERR! EROFS: read-only file system, open '/usr/lib/node_modules/q'\n",
            "/usr/lib/node_modules/q",
        ),
        (
            "OSError: [Errno 30] Read-only file system: '.git/hooks/pre-push'\n",
            "/work/app/.git/hooks/pre-push",
        ),
        ("touch: cannot touch 'mine.txt': Permission denied\n", None),
        # EACCES answers reads too: it names no path.
        ("cat: /etc/shadow: Permission denied\n", None),
        ("PermissionError: [Errno 13] Permission denied: '/etc/x'\n", None),
        # The program's name is not the path: the one before the reason is.
        (
            "/usr/bin/bash: line 26: .git/hooks/pre-commit: Read-only file system\n",
            "/work/app/.git/hooks/pre-commit",
        ),
        ("/usr/bin/bash: line 3: notes.txt: Read-only file system\n", None),
        ("everything is fine at /etc/x\n", None),
    ],
)
def test_denied_path(output: str, path: str | None) -> None:
    assert denied_path(output, 1, make("workspace-write"), WORKSPACE) == path


@pytest.mark.parametrize(
    "output",
    [
        "tool: stat of /x failed: Permission denied\n",
        "tool: write of /x failed: Read-only file system\n",
    ],
)
def test_the_last_word_of_a_phrase_is_not_a_path(output: str) -> None:
    """Not `<cwd>/failed`: a bare word counts only as a whole field, as bash prints one."""
    assert denied_path(output, 1, make("read-only"), "/srv") is None


def test_only_failed_commands_in_confined_modes_are_read() -> None:
    line = "touch: cannot touch '/etc/x': Read-only file system\n"
    assert denied_path(line, 0, make("workspace-write"), WORKSPACE) is None
    assert denied_path(line, 1, make("full"), WORKSPACE) is None
    assert denied_path(line, 1, None, WORKSPACE) is None
    notice = denial_notice("/etc/x", make("read-only"))
    assert notice == messages.SANDBOX_DENIED.format(
        mode="read-only", path="/etc/x", writable=messages.SANDBOX_PRIVATE_TMP
    )


def test_a_root_under_tmp_is_judged_as_a_root() -> None:
    made = policy(
        "workspace-write",
        network=False,
        workspace="/tmp/ws",
        writable_roots=(),
        protected_paths=(),
    )
    assert made is not None
    assert mounts.allows_write(made, "/tmp/ws/src/a.py") and mounts.allows_write(
        made, "/tmp/elsewhere"
    )
    assert not mounts.allows_write(made, "/tmp/ws/.git/hooks/pre-commit")
    read_only = policy(
        "read-only", network=False, workspace="/tmp/ws", writable_roots=(), protected_paths=()
    )
    assert read_only is not None
    assert not mounts.allows_write(read_only, "/tmp/ws/a") and mounts.allows_write(
        read_only, "/tmp/scratch"
    )
