"""What bwrap is told beyond the binds: no capability, the socket filter, and the
runtime directory hidden but for the shell's own part of it."""

from __future__ import annotations

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server.runtime.sandbox import mounts
from bashrpc.server.runtime.seam.policy import Policy

WORKSPACE = "/work/app"
RUNTIME = "/var/tmp/bashrpc-x"


def argv(mode: SandboxMode, network: bool = False, filter_fd: int | None = None) -> list[str]:
    policy = Policy(mode, network, (WORKSPACE,), ())
    return mounts.argv(
        policy,
        ["bash"],
        cwd=WORKSPACE,
        bwrap="bwrap",
        private_dir=f"{RUNTIME}/s1",
        read_only_files=[f"{RUNTIME}/snapshot-1.sh"],
        runtime_dir=RUNTIME,
        filter_fd=filter_fd,
    )


def test_confined_modes_drop_every_capability_and_full_keeps_them() -> None:
    for mode in ("read-only", "workspace-write"):
        args = argv(mode)
        assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--cap-drop" not in argv("full")


def test_the_runtime_directory_is_masked_before_the_shells_own_binds() -> None:
    args = argv("workspace-write")
    mask = args.index(RUNTIME)
    assert args[mask - 1] == "--tmpfs"
    # After the workspace (it may sit inside), before what is bound back into it.
    assert args.index(WORKSPACE) < mask < args.index(f"{RUNTIME}/s1")
    assert mask < args.index(f"{RUNTIME}/snapshot-1.sh")
    # full sees the host as it is, but for the other sessions' command files and FIFOs.
    full = argv("full")
    assert full[full.index("--tmpfs") + 1] == RUNTIME and full.count("--tmpfs") == 1


def test_the_socket_filter_is_where_the_network_is_off() -> None:
    policies = [Policy(m, n, (), ()) for m in ("full", "workspace-write") for n in (False, True)]
    assert [p.filters_sockets for p in policies] == [False, False, True, False]
    args = argv("read-only", filter_fd=7)
    assert args[args.index("--seccomp") + 1] == "7"
    assert "--seccomp" not in argv("read-only")
