"""A seccomp-BPF filter, assembled in pure Python (no libseccomp needed).

Denied with EPERM: ptrace and cross-process memory access, mount and the new mount API,
pivot_root/chroot, unshare/setns and namespace-creating clone flags, keyctl and friends,
bpf, perf_event_open, module loading, kexec, reboot, swap, acct, userfaultfd and file
handles. clone3 gets ENOSYS (its flags live behind a pointer the filter cannot read), so
libc falls back to clone, whose flags the filter checks. Any other architecture than
the one the filter was built for (e.g. x32 or 32-bit syscalls on x86_64) is killed.

The sandboxed program runs with no_new_privs (bwrap sets it), so the filter cannot be
shed by exec-ing a setuid binary. It is applied by bwrap (`--seccomp FD`) in fresh mode
and by the zygote's execution child in pooled mode.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
from functools import lru_cache

# seccomp_data: int nr @0, u32 arch @4, u64 ip @8, u64 args[6] @16
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

_DENY = (
    "ptrace process_vm_readv process_vm_writev mount umount2 pivot_root chroot "
    "fsopen fsconfig fsmount fspick move_mount open_tree mount_setattr unshare setns "
    "keyctl add_key request_key bpf perf_event_open init_module finit_module delete_module "
    "kexec_load kexec_file_load reboot swapon swapoff acct userfaultfd "
    "open_by_handle_at name_to_handle_at"
).split()

_TABLES = {
    "x86_64": (0xC000003E, {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165, "umount2": 166,
        "pivot_root": 155, "chroot": 161, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "unshare": 272, "setns": 308,
        "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
        "userfaultfd": 323, "open_by_handle_at": 304, "name_to_handle_at": 303, "clone": 56, "clone3": 435,
    }),
    "aarch64": (0xC00000B7, {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "move_mount": 429, "open_tree": 428, "mount_setattr": 442, "unshare": 97, "setns": 268,
        "keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "perf_event_open": 241,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89,
        "userfaultfd": 282, "open_by_handle_at": 265, "name_to_handle_at": 264, "clone": 220, "clone3": 435,
    }),
}  # fmt: skip


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def available() -> bool:
    return platform.machine() in _TABLES


@lru_cache(maxsize=1)
def program() -> bytes:
    """The filter as a `struct sock_filter[]` byte string."""
    arch, nrs = _TABLES[platform.machine()]
    deny = [nrs[name] for name in _DENY]
    prog = [_ins(_LD_W_ABS, 4), _ins(_JEQ, arch, 1, 0), _ins(_RET, RET_KILL_PROCESS), _ins(_LD_W_ABS, 0)]
    if platform.machine() == "x86_64":
        prog += [_ins(_JGE, 0x40000000, 0, 1), _ins(_RET, RET_KILL_PROCESS)]  # x32 ABI
    # Layout after this point: [deny checks][clone3][clone][allow][eperm][enosys][ns-flag check]
    n = len(deny)
    # from deny check i, the EPERM return is (n - i - 1) + 2 (clone3, clone) + 1 (allow) further on
    for i, nr in enumerate(deny):
        prog.append(_ins(_JEQ, nr, n - i - 1 + 3, 0))
    prog.append(_ins(_JEQ, nrs["clone3"], 3, 0))  # -> enosys
    prog.append(_ins(_JEQ, nrs["clone"], 3, 0))  # -> flag check
    prog.append(_ins(_RET, RET_ALLOW))
    prog.append(_ins(_RET, RET_ERRNO | errno.EPERM))
    prog.append(_ins(_RET, RET_ERRNO | errno.ENOSYS))
    prog.append(_ins(_LD_W_ABS, 16))  # low 32 bits of clone flags (little-endian)
    prog.append(_ins(_JSET, _NS_FLAGS, 0, 1))
    prog.append(_ins(_RET, RET_ERRNO | errno.EPERM))
    prog.append(_ins(_RET, RET_ALLOW))
    return b"".join(prog)


def seccomp_fd() -> int:
    """A fresh readable fd holding the program, as `bwrap --seccomp FD` wants (offset 0)."""
    r, w = os.pipe2(os.O_CLOEXEC)
    os.write(w, program())
    os.close(w)
    return r
