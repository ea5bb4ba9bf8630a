"""The sandbox a shell or a program runs in, as the value every backend is given.

What the policy means on a filesystem (bwrap's command line, which paths a
command may write, what a new sandbox shows) is the sandbox's own
(`sandbox/mounts.py`); here is only what a host asked for, resolved.
"""

from __future__ import annotations

import msgspec

from bashrpc.protocol.methods import SandboxMode
from bashrpc.server.runtime.seam.egress import Egress

# Modes that limit neither the filesystem nor the network.
UNCONFINED_MODES = ("off", "full")


class Policy(msgspec.Struct, frozen=True):
    mode: SandboxMode
    network: bool
    # Absolute, normalized: the workspace first. Writable in `workspace-write` only,
    # visible (over the private /tmp) in `read-only`.
    writable_roots: tuple[str, ...]
    # Absolute paths, or relative ones taken in each writable root.
    protected_paths: tuple[str, ...]
    # Directories the host opened a session in, outside the roots: bound read-only.
    shown: tuple[str, ...] = ()
    # Git dirs writable but for what decides what git runs (`sandbox/gitguard.py`).
    git_commits: bool = False
    # Without `network`: the allowlist whose proxy is the only way out; None, none.
    egress: Egress | None = None

    @property
    def confined(self) -> bool:
        """Whether the filesystem (and, without `network`, the network) is limited."""
        return self.mode not in UNCONFINED_MODES

    @property
    def filters_sockets(self) -> bool:
        """Whether unix sockets are refused: a network namespace does not hide the
        host's filesystem ones."""
        return self.confined and not self.network

    @property
    def writable(self) -> tuple[str, ...]:
        return self.writable_roots if self.mode == "workspace-write" else ()

    @property
    def unserved(self) -> Policy:
        """The policy without the key of the gateway that serves it (one per
        session): a sandbox looks the same from inside under either, and one made
        under this one has no way out at all."""
        if self.egress is None or not self.egress.gateway:
            return self
        egress = msgspec.structs.replace(self.egress, gateway="")
        return msgspec.structs.replace(self, egress=egress)
