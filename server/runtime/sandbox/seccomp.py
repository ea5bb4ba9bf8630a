"""The seccomp filter that keeps a confined command off the host's unix sockets (pure).

connect() to a filesystem unix socket needs no write access to its mount, so a
read-only bind does not stop it, and a network namespace scopes only abstract
sockets. A classic BPF filter cannot read the address connect() is given, and
Landlock here (ABI 7, kernel 6.18) scopes abstract sockets, not pathname ones.
So, with the network off, the filter refuses to make a unix socket at all:
socket(AF_UNIX, ...) fails with EPERM, and so does io_uring_setup (io_uring's
socket and connect operations pass no filter). socketpair() keeps working for
stream and seqpacket pairs, which are connected from the start and cannot be
connected again; a datagram pair could send to any path, so it is refused.

The program is checked against the audit arch first: a 32-bit x86 process
(whose socketcall() multiplexes every socket call behind a pointer) and the
x32 ABI get their own numbers or are refused, an unknown arch is killed.
bwrap loads it (`--seccomp FD`) after setting no_new_privs.
"""

from __future__ import annotations

import struct
import sys

import msgspec

# <linux/audit.h>
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
# <linux/seccomp.h>
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
AF_UNIX = 1
SOCK_STREAM, SOCK_SEQPACKET = 1, 5
# The type argument's low bits; SOCK_CLOEXEC and SOCK_NONBLOCK sit above.
SOCK_TYPE_MASK = 0xF
# x32 system calls: the x86-64 arch with this bit in the number.
X32_SYSCALL_BIT = 0x40000000
# struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments.
NR_OFFSET, ARCH_OFFSET, ARGS_OFFSET = 0, 4, 16
# The low 32 bits of an argument (these arches are little-endian).
ARG_LOW = 0 if sys.byteorder == "little" else 4
# <linux/filter.h>: struct sock_filter { u16 code; u8 jt; u8 jf; u32 k; }
INSTRUCTION = struct.Struct("=HBBI")
LD_W_ABS, JEQ_K, JGE_K, AND_K, RET_K = 0x20, 0x15, 0x35, 0x54, 0x06


class Syscalls(msgspec.Struct, frozen=True):
    """One arch's numbers for the calls the filter looks at."""

    socket: int
    socketpair: int
    # Refused outright: io_uring_setup, and socketcall where there is one.
    refused: tuple[int, ...]
    # Numbers from here up are another ABI's (x32): all refused.
    foreign_from: int | None = None


IO_URING_SETUP = 425
ARCHES = {
    AUDIT_ARCH_X86_64: Syscalls(41, 53, (IO_URING_SETUP,), foreign_from=X32_SYSCALL_BIT),
    AUDIT_ARCH_I386: Syscalls(359, 360, (102, IO_URING_SETUP)),
    AUDIT_ARCH_AARCH64: Syscalls(198, 199, (IO_URING_SETUP,)),
}
# The machines (os.uname().machine) whose processes the filter knows.
MACHINES = ("x86_64", "aarch64")


def _arg(index: int) -> int:
    return ARGS_OFFSET + 8 * index + ARG_LOW


# An instruction: (code, jump if true, jump if false, k); a jump is a label or 0 (the next).
# A bare string in a program is a label: it names the instruction after it.
Op = tuple[int, str | int, str | int, int] | str


def _program() -> list[Op]:
    ops: list[Op] = [(LD_W_ABS, 0, 0, ARCH_OFFSET)]
    ops += [(JEQ_K, f"arch{arch:x}", 0, arch) for arch in ARCHES]
    ops.append((RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS))
    for arch, calls in ARCHES.items():
        ops += [f"arch{arch:x}", (LD_W_ABS, 0, 0, NR_OFFSET)]
        if calls.foreign_from is not None:
            ops.append((JGE_K, "deny", 0, calls.foreign_from))
        ops += [(JEQ_K, "deny", 0, nr) for nr in calls.refused]
        ops.append((JEQ_K, "socket", 0, calls.socket))
        ops.append((JEQ_K, "socketpair", "allow", calls.socketpair))
    ops += [
        "socket",
        (LD_W_ABS, 0, 0, _arg(0)),
        (JEQ_K, "deny", "allow", AF_UNIX),
        "socketpair",
        (LD_W_ABS, 0, 0, _arg(0)),
        (JEQ_K, 0, "allow", AF_UNIX),
        (LD_W_ABS, 0, 0, _arg(1)),
        (AND_K, 0, 0, SOCK_TYPE_MASK),
        (JEQ_K, "allow", 0, SOCK_STREAM),
        (JEQ_K, "allow", 0, SOCK_SEQPACKET),
        "deny",
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        "allow",
        (RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return ops


def unix_socket_filter() -> bytes:
    """The filter as bwrap reads it: one struct sock_filter after another."""
    labels: dict[str, int] = {}
    instructions: list[tuple[int, str | int, str | int, int]] = []
    for op in _program():
        if isinstance(op, str):
            labels[op] = len(instructions)
        else:
            instructions.append(op)

    def offset(index: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - index - 1

    return b"".join(
        INSTRUCTION.pack(code, offset(i, true), offset(i, false), k)
        for i, (code, true, false, k) in enumerate(instructions)
    )
