"""Starting bwrap: whether a sandbox can be made here (the probe, once), and a
command's launch under a policy, with the seccomp filter it reads from a pipe.

The policy itself, and the command line it makes, are pure (`mounts.py`);
this is the part that runs processes and opens descriptors.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence

import anyio.to_thread
import msgspec

from bashrpc.protocol import messages
from bashrpc.server.errors import SandboxUnavailable
from bashrpc.server.runtime.network import handoff
from bashrpc.server.runtime.sandbox import mounts, seccomp
from bashrpc.server.runtime.sandbox.git import scan as gitscan
from bashrpc.server.runtime.seam.policy import Policy

_log = logging.getLogger(__name__)

# How long the probe sandbox may take to start and exit.
PROBE_SECONDS = 10.0


class Launch(msgspec.Struct):
    """A command line to start, and the descriptors its process must be given; the
    caller closes them (`close`) once it has started, or failed to."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    # What the git guard did that the first result on it says (`gitguard.Plan`).
    notices: tuple[str, ...] = ()

    def close(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()


async def wrap(
    argv: list[str],
    policy: Policy | None,
    *,
    cwd: str,
    private_dir: str | None = None,
    read_only_files: Sequence[str] = (),
    new_session: bool = True,
    runtime_dir: str | None = None,
    overlays: Sequence[tuple[str, str]] = (),
) -> Launch:
    """`argv` as it runs under `policy`: unchanged without one, else through bwrap
    (which raises SandboxUnavailable where no sandbox can be made)."""
    if policy is None:
        return Launch(argv)
    bwrap = await bwrap_path()
    # Abandoned when cancelled (a timeout, an abort, the server's exit): the scan
    # blocks on nothing and ends by its own deadline.
    guard = await anyio.to_thread.run_sync(
        functools.partial(gitscan.prepare, policy.writable, commits=policy.git_commits),
        abandon_on_cancel=True,
    )
    if guard.refused is not None:
        raise SandboxUnavailable(messages.SANDBOX_UNAVAILABLE.format(reason=guard.refused))
    for notice in guard.notices:
        _log.warning("%s", notice)
    filter_fd = socket_filter_fd() if policy.filters_sockets else None
    ends = _egress(policy)
    wrapped = mounts.argv(
        policy,
        argv,
        cwd=cwd,
        bwrap=bwrap,
        private_dir=private_dir,
        read_only_files=read_only_files,
        new_session=new_session,
        runtime_dir=runtime_dir,
        filter_fd=filter_fd,
        git=guard.binds,
        overlays=overlays,
        network=() if ends is None else handoff.bwrap_args(ends),
    )
    inside = () if ends is None else ends.inside
    passed = tuple(fd for fd in (filter_fd, *inside) if fd is not None)
    return Launch(wrapped, passed, guard.notices)


def _egress(policy: Policy) -> handoff.Ends | None:
    """With an allowlist, the ends of the sandbox's listener handoff
    (`network/handoff.py`): bwrap's, and the session's proxy's, given to it now.
    A policy whose gateway is gone gets none, and no way out."""
    if policy.egress is None:
        return None
    # Here: a sandbox without an allowlist never loads the proxy.
    from bashrpc.server.runtime.network import gateway

    found = gateway.find(policy.egress.gateway)
    if found is None:
        return None
    ends = handoff.ends()
    found.attach(ends)
    return ends


def socket_filter_fd() -> int:
    """A pipe's read end holding the seccomp filter, for one bwrap to read whole.

    One per start: bwrap reads to EOF, and a shared descriptor shares its offset.
    The filter (some 250 bytes) fits a pipe's buffer, so the write never blocks."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        os.write(write_end, _filter())
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


@functools.cache
def _filter() -> bytes:
    return seccomp.unix_socket_filter()


async def bwrap_path() -> str:
    """bwrap, once checked to start a sandbox here; raises SandboxUnavailable otherwise."""
    path, problem = await anyio.to_thread.run_sync(probe)
    if problem is not None:
        raise SandboxUnavailable(messages.SANDBOX_UNAVAILABLE.format(reason=problem))
    assert path is not None
    return path


@functools.cache
def probe() -> tuple[str | None, str | None]:
    """(bwrap's path, None) when a sandbox starts here, else (None, why); tried once.

    The probe asks for every namespace a shell may use, and loads the socket
    filter, so a machine that allows only some fails here, not on a user's command."""
    path = shutil.which("bwrap")
    if path is None:
        return None, messages.SANDBOX_NO_BWRAP
    machine = os.uname().machine
    if machine not in seccomp.MACHINES:
        return None, messages.SANDBOX_NO_SOCKET_FILTER.format(machine=machine)
    filter_fd = socket_filter_fd()
    policy = Policy("read-only", False, (), ())
    argv = mounts.argv(policy, ["true"], cwd="/", bwrap=path, filter_fd=filter_fd)
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(filter_fd,),
            timeout=PROBE_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, messages.SANDBOX_BWRAP_FAILED.format(detail=exc)
    finally:
        os.close(filter_fd)
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        return None, messages.SANDBOX_BWRAP_FAILED.format(detail=detail)
    return path, None
