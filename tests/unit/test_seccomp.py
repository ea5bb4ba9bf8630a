"""The unix-socket filter's bytes, run on a small classic-BPF interpreter: what
each arch's calls get, without a kernel."""

from __future__ import annotations

import struct

import msgspec
import pytest

from bashrpc.server.runtime.sandbox import seccomp
from bashrpc.server.runtime.sandbox.seccomp import (
    AF_UNIX,
    AUDIT_ARCH_AARCH64,
    AUDIT_ARCH_I386,
    AUDIT_ARCH_X86_64,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_KILL_PROCESS,
)

DENIED = SECCOMP_RET_ERRNO | seccomp.EPERM
AF_INET, AF_NETLINK = 2, 16
SOCK_DGRAM, SOCK_RAW = 2, 3
SOCK_CLOEXEC_NONBLOCK = 0o2000000 | 0o4000
# Instructions a program may run: a loop would need a backward jump, which BPF has not.
MAX_STEPS = 4096


class Call(msgspec.Struct, frozen=True):
    arch: int
    nr: int
    args: tuple[int, ...] = ()

    def data(self) -> bytes:
        """struct seccomp_data, as the kernel lays it out here."""
        args = (*self.args, 0, 0, 0, 0, 0, 0)[:6]
        return struct.pack("=iIQ6Q", self.nr, self.arch, 0, *args)


def run(program: bytes, call: Call) -> int:
    """Classic BPF with what the filter uses: absolute word loads, AND, JEQ, JGE, RET."""
    data = call.data()
    insns = [seccomp.INSTRUCTION.unpack_from(program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    for _ in range(MAX_STEPS):
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == seccomp.LD_W_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
        elif code == seccomp.AND_K:
            acc &= k
        elif code == seccomp.JEQ_K:
            pc += jt if acc == k else jf
        elif code == seccomp.JGE_K:
            pc += jt if acc >= k else jf
        elif code == seccomp.RET_K:
            return int(k)
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the program did not return")


FILTER = seccomp.unix_socket_filter()


@pytest.mark.parametrize(
    ("call", "verdict"),
    [
        # x86-64: unix sockets refused, whatever the flags; others made.
        (Call(AUDIT_ARCH_X86_64, 41, (AF_UNIX, 1)), DENIED),
        (Call(AUDIT_ARCH_X86_64, 41, (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC_NONBLOCK)), DENIED),
        (Call(AUDIT_ARCH_X86_64, 41, (AF_INET, 1)), SECCOMP_RET_ALLOW),
        (Call(AUDIT_ARCH_X86_64, 41, (AF_NETLINK, SOCK_RAW)), SECCOMP_RET_ALLOW),
        # The high half of the domain is not the kernel's int: the low word decides.
        (Call(AUDIT_ARCH_X86_64, 41, ((1 << 32) | AF_UNIX, 1)), DENIED),
        # socketpair: stream and seqpacket pairs made, datagram (and raw, one) refused.
        (Call(AUDIT_ARCH_X86_64, 53, (AF_UNIX, 1 | SOCK_CLOEXEC_NONBLOCK)), SECCOMP_RET_ALLOW),
        (Call(AUDIT_ARCH_X86_64, 53, (AF_UNIX, 5)), SECCOMP_RET_ALLOW),
        (Call(AUDIT_ARCH_X86_64, 53, (AF_UNIX, SOCK_DGRAM)), DENIED),
        (Call(AUDIT_ARCH_X86_64, 53, (AF_UNIX, SOCK_RAW)), DENIED),
        (Call(AUDIT_ARCH_X86_64, 53, (AF_INET, SOCK_DGRAM)), SECCOMP_RET_ALLOW),
        # io_uring, whose socket and connect no filter sees.
        (Call(AUDIT_ARCH_X86_64, 425), DENIED),
        # connect, read, write: untouched.
        (Call(AUDIT_ARCH_X86_64, 42, (3, 0, 110)), SECCOMP_RET_ALLOW),
        (Call(AUDIT_ARCH_X86_64, 0), SECCOMP_RET_ALLOW),
        # x32: every call refused.
        (Call(AUDIT_ARCH_X86_64, 0x40000000 + 41, (AF_UNIX, 1)), DENIED),
        (Call(AUDIT_ARCH_X86_64, 0x40000000), DENIED),
        # 32-bit x86: its numbers, and socketcall (arguments behind a pointer) refused.
        (Call(AUDIT_ARCH_I386, 359, (AF_UNIX, 1)), DENIED),
        (Call(AUDIT_ARCH_I386, 360, (AF_UNIX, 1)), SECCOMP_RET_ALLOW),
        (Call(AUDIT_ARCH_I386, 102, (1, 0)), DENIED),
        (Call(AUDIT_ARCH_I386, 41, (AF_UNIX, 1)), SECCOMP_RET_ALLOW),  # dup there
        (Call(AUDIT_ARCH_AARCH64, 198, (AF_UNIX, 1)), DENIED),
        (Call(AUDIT_ARCH_AARCH64, 199, (AF_UNIX, SOCK_DGRAM)), DENIED),
        (Call(AUDIT_ARCH_AARCH64, 41, (AF_UNIX, 1)), SECCOMP_RET_ALLOW),
        # An arch the filter does not know: killed, not judged by another's numbers.
        (Call(0x40000028, 281, (AF_UNIX, 1)), SECCOMP_RET_KILL_PROCESS),
    ],
)
def test_verdicts(call: Call, verdict: int) -> None:
    assert run(FILTER, call) == verdict


def test_every_jump_lands_inside_the_program() -> None:
    count = len(FILTER) // 8
    assert len(FILTER) % 8 == 0 and count < 256
    for index in range(count):
        code, jt, jf, _ = seccomp.INSTRUCTION.unpack_from(FILTER, index * 8)
        if code in (seccomp.JEQ_K, seccomp.JGE_K):
            assert index + 1 + max(jt, jf) < count
    last = seccomp.INSTRUCTION.unpack_from(FILTER, len(FILTER) - 8)
    assert last[0] == seccomp.RET_K
