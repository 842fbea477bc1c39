"""The seccomp filter bubblewrap installs: no user namespaces inside, and so no mounts of the
program's own past the tmpfs and file-size caps."""

from __future__ import annotations

import errno
import functools
import logging
import platform
import struct

log = logging.getLogger(__name__)

# machine: (AUDIT_ARCH, unshare, clone, clone3, setns, has the x32 ABI)
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435, 308, True),
    "aarch64": (0xC00000B7, 97, 220, 435, 268, False),
}
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000
BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_AND, BPF_RET = 0x20, 0x15, 0x35, 0x54, 0x06
SECCOMP_ALLOW, SECCOMP_ERRNO = 0x7FFF0000, 0x00050000


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes | None:
    """unshare/clone asking for a user namespace fail with EPERM; so do setns and foreign
    ABIs; clone3 fails with ENOSYS (its flags are out of a filter's reach, libc falls back
    to clone). None, said once, on a machine the table does not know."""
    arch = SECCOMP_ARCHES.get(platform.machine())
    if arch is None:
        log.warning("sandbox: no seccomp filter for %s; programs may create user namespaces",
                    platform.machine())
        return None
    audit, unshare, clone, clone3, setns, x32 = arch
    program = [(BPF_LD_ABS, 4), (BPF_JEQ, audit, 0, "deny"), (BPF_LD_ABS, 0),
               *([(BPF_JGE, X32_SYSCALL_BIT, "deny", 0)] if x32 else []),
               (BPF_JEQ, clone3, "enosys", 0), (BPF_JEQ, setns, "deny", 0),
               (BPF_JEQ, unshare, "flags", 0), (BPF_JEQ, clone, "flags", "allow"),
               "flags", (BPF_LD_ABS, 16), (BPF_AND, CLONE_NEWUSER), (BPF_JEQ, 0, "allow", "deny"),
               "allow", (BPF_RET, SECCOMP_ALLOW), "deny", (BPF_RET, SECCOMP_ERRNO | errno.EPERM),
               "enosys", (BPF_RET, SECCOMP_ERRNO | errno.ENOSYS)]
    return assemble(program)


def assemble(program: list) -> bytes:
    """Classic BPF from (code, k[, jump if true, jump if false]) rows; jumps name labels."""
    labels, rows = {}, []
    for row in program:
        if isinstance(row, str):
            labels[row] = len(rows)
        else:
            rows.append(row)
    out = b""
    for index, (code, k, *jumps) in enumerate(rows):
        jt, jf = (labels[j] - index - 1 if isinstance(j, str) else j for j in (*jumps, 0, 0)[:2])
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out
