"""The bubblewrap sandbox a shell runs in: its policy, its command line, whether it works.

Every sandboxed shell (mode other than `off`) gets a PID namespace of its own
with bwrap's init as pid 1: when that init dies, the kernel kills everything
in the namespace, `setsid env -i` escapees included. bwrap dies with the
server (PR_SET_PDEATHSIG, set by `child.spawn`) and the init with bwrap
(`--die-with-parent`), so a SIGKILLed server leaves nothing behind.

Filesystem, by mode: `full` sees the host's as it is; `read-only` and
`workspace-write` see it read-only with a private /tmp, the latter with the
workspace and `writableRoots` bound writable again, then every git dir they
reach and what the host's git reads for them kept as the host has it
(`gitguard.py`; with `gitCommits`, all but what decides what git runs is
writable), and `protectedPaths` bound read-only inside them. They run with
no capability, even as root (`--cap-drop ALL`; bwrap sets no_new_privs).
Without `network`, they get a network namespace with loopback alone, and a
seccomp filter that refuses unix sockets (`seccomp.py`), whose filesystem
addresses a network namespace does not hide.

The server's runtime directory holds every shell's FIFOs and command file: a
confined shell gets it as an empty tmpfs, wherever TMPDIR puts it, with only
its own directory bound in writable and the rc snapshot read-only, so the
persistent-shell protocol works unchanged and no other session's is in reach.
A daemon's own files (its socket's directory, its token files: `Hidden`) are
hidden in every sandbox it starts, in every mode.

A shell's directory is never a bind source: a command may `cd` anywhere, and
a restarted shell bound there would see the host's /tmp over its private one,
or the host's / (with its /proc and its nodev /dev) over everything. Only a
directory the host opened a session in is `shown`, and never one that would
cover the sandbox's own /tmp, /proc or /dev.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server.runtime.sandbox.git import guard as gitguard
from bashrpc.server.runtime.sandbox.git.guard import Bind
from bashrpc.server.runtime.seam.policy import Policy

# A tmpfs of each confined shell's own, over the host's.
PRIVATE_TMP = "/tmp"
# What every confined sandbox mounts of its own; `full` has its own /proc alone.
OWN_MOUNTS = ("/dev", "/proc", PRIVATE_TMP)
FULL_OWN_MOUNTS = ("/proc",)


def allows_write(policy: Policy, path: str) -> bool:
    """Whether a command may write `path` (absolute, normalized) under `policy`."""
    if not policy.confined:
        return True
    if any(_within(path, root) for root in policy.writable_roots):
        # Bound over the private /tmp, if that is where a root is.
        roots = policy.writable
        return bool(roots) and not any(_within(path, p) for p in _protected(policy, roots))
    if any(_within(path, directory) for directory in policy.shown):
        return False
    return _within(path, PRIVATE_TMP)


def keeps(policy: Policy, path: str) -> bool:
    """Whether a new sandbox of `policy` shows `path` (absolute, normalized) as the
    host has it, or as one of its own mounts (or above them, like /), there in every
    sandbox.

    Below its own mounts it does not: what a command left in an earlier
    shell's private /tmp, or a /proc entry of its namespace, is gone."""
    if not policy.confined:
        return not _below_own_mounts(path, FULL_OWN_MOUNTS)
    if any(_within(path, directory) for directory in (*policy.writable_roots, *policy.shown)):
        return True
    return not _below_own_mounts(path, OWN_MOUNTS)


def _protected(policy: Policy, roots: Sequence[str], *, builtin: bool = True) -> list[str]:
    # What would run code outside the sandbox, as the denial notice judges
    # (the git guard binds it, knowing where it is).
    out = list(gitguard.protected(roots, commits=policy.git_commits)) if builtin else []
    for path in policy.protected_paths:
        if os.path.isabs(path):
            out.append(os.path.normpath(path))
        else:
            out.extend(os.path.normpath(os.path.join(root, path)) for root in roots)
    return out


def argv(
    policy: Policy,
    command: Sequence[str],
    *,
    cwd: str,
    bwrap: str,
    private_dir: str | None = None,
    read_only_files: Sequence[str] = (),
    new_session: bool = True,
    runtime_dir: str | None = None,
    filter_fd: int | None = None,
    git: Sequence[Bind] = (),
    overlays: Sequence[tuple[str, str]] = (),
    network: Sequence[str] = (),
) -> list[str]:
    """bwrap's command line running `command` in `cwd` under `policy`.

    `filter_fd`: where bwrap reads the seccomp filter; `git`: the git guard's binds;
    `overlays`: (source, path) files bound read-only over paths (`sealed.py`);
    `network`: bwrap's options for an allowlist's listener (`network/handoff.py`).

    `runtime_dir` (the server's) is hidden from the command, but for
    `private_dir` (read-only: the server alone makes, names and removes what is
    in it) and `read_only_files` inside it.

    `new_session` is off for PTYs, whose terminal must stay the controlling
    one; the TIOCSTI injection it guards against needs the user's terminal."""
    args = [bwrap, "--die-with-parent", "--unshare-pid"]
    if new_session:
        args.append("--new-session")
    if policy.confined:
        args += _confined_args(policy, filter_fd, git)
    else:
        args += ["--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    bound = [*policy.writable_roots, *policy.shown, *(pin.path for pin in git), cwd]
    args += _hidden_args(_hidden, bound)
    if runtime_dir is not None:
        # Other sessions' command text, env values and FIFOs: never in view.
        args += ["--tmpfs", runtime_dir]
    if private_dir is not None:
        # A FIFO on a read-only mount still opens for writing: the shell needs no
        # more, and the command cannot put a FIFO of its own in a FIFO's place.
        args += ["--ro-bind", private_dir, private_dir]
    for path in read_only_files:
        args += ["--ro-bind", path, path]
    for source, path in overlays:
        args += ["--ro-bind", source, path]
    return [*args, *network, "--chdir", cwd, "--", *command]


class Hidden(msgspec.Struct, frozen=True):
    """The server's own files that no sandbox it starts may see, in any mode: a
    daemon's socket directory (its socket, lock and log) and its token files.
    A command that reached the socket could drive the daemon that confined it."""

    directories: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


_hidden = Hidden()


def hide_in_every_sandbox(hidden: Hidden) -> None:
    """What every sandbox this process starts from now on hides (set once, at the
    start of a daemon: the paths are its own, for its whole life)."""
    global _hidden
    _hidden = hidden


def _hidden_args(hidden: Hidden, bound: Sequence[str]) -> list[str]:
    """An empty tmpfs over each hidden directory, but one that holds what the
    sandbox binds (a root, the cwd): then /dev/null over each hidden file in it.
    What is gone from the host by now is left out (bwrap cannot make a mount
    point on a read-only /)."""
    args: list[str] = []
    covered: list[str] = []
    for directory in hidden.directories:
        if os.path.isdir(directory) and not any(_within(p, directory) for p in bound):
            args += ["--tmpfs", directory]
            covered.append(directory)
    for path in hidden.files:
        if os.path.lexists(path) and not any(_within(path, d) for d in covered):
            args += ["--ro-bind", os.devnull, path]
    return args


def _confined_args(policy: Policy, filter_fd: int | None, git: Sequence[Bind]) -> list[str]:
    """What limits a confined mode: capabilities, the read-only root and what is
    bound over it, the network."""
    # As root bwrap keeps every capability, and CAP_SYS_ADMIN remounts / writable.
    # (bwrap always sets no_new_privs: nothing regains them through exec.)
    args = ["--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--tmpfs", PRIVATE_TMP]
    if not policy.network:
        args.append("--unshare-net")
    if filter_fd is not None:
        args += ["--seccomp", str(filter_fd)]
    for directory in policy.shown:
        # A session the host opened elsewhere: there to read, not to write;
        # first, so that one above a root leaves the root as it is bound.
        args += ["--ro-bind-try", directory, directory]
    # The roots are bound again over the private /tmp, read-only where not writable,
    # so a workspace there stays visible.
    # `-try`: a configured root that does not exist is skipped, not fatal.
    bind = "--bind-try" if policy.mode == "workspace-write" else "--ro-bind-try"
    for root in policy.writable_roots:
        args += [bind, root, root]
    for pin in git:
        # `-try`: what the scan found may be gone by now.
        args += ["--bind-try" if pin.writable else "--ro-bind-try", pin.path, pin.path]
    for path in _protected(policy, policy.writable, builtin=False):
        args += ["--ro-bind-try", path, path]
    return args


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _below_own_mounts(path: str, mounts: Sequence[str]) -> bool:
    return any(_within(path, mount) and path != mount for mount in mounts)


def showable(directory: str) -> bool:
    """Whether binding `directory` (absolute, normalized) leaves the sandbox's own
    /tmp, /proc and /dev uncovered: not one of them or above them, nor inside /proc
    or /dev (inside the private /tmp is fine: the workspace may be there too)."""
    if any(_within(mount, directory) for mount in OWN_MOUNTS):
        return False
    return not any(_within(directory, mount) for mount in OWN_MOUNTS if mount != PRIVATE_TMP)


def policy(
    mode: SandboxMode,
    *,
    network: bool,
    workspace: str,
    writable_roots: Sequence[str],
    protected_paths: Sequence[str],
    opened_in: str | None = None,
    git_commits: bool = False,
) -> Policy | None:
    """The policy of a mode; None for `off`. `opened_in`: the directory the host
    opened the session in, shown read-only when outside the roots (and showable)."""
    if mode == "off":
        return None
    # Configured roots that do not exist (yet) are left out, here and in the notice.
    extra = [os.path.expanduser(r) for r in writable_roots]
    roots = [workspace, *(r for r in extra if os.path.isdir(r))]
    resolved = tuple(dict.fromkeys(os.path.realpath(r) for r in roots))
    shown: tuple[str, ...] = ()
    if opened_in is not None and not any(_within(opened_in, root) for root in resolved):
        shown = (opened_in,) if showable(opened_in) else ()
    return Policy(mode, network, resolved, tuple(protected_paths), shown, git_commits)
