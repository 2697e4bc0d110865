"""Isolated, observable, reproducible execution of untrusted code, without Docker.

    from posttrain.sandbox import SandboxPool, default_sandbox
    res = await default_sandbox().exec(["python3", "main.py"], files={"main.py": src}, limits=ExecLimits(wall_s=5))
    async with pool.session("host") as s: await s.run("make test", timeout=60)

Threat model
------------
The adversary is the program: model-written code that may be buggy or hostile. It must
not read or change anything on the host, reach any network, outlive its execution,
starve the host of memory/CPU/pids/disk, or falsify another execution's result.

What stops it (each execution, both modes):
- Namespaces: user, mount, pid, net, ipc, uts (+ cgroup) via bubblewrap. The sandbox uid
  maps to an otherwise unused host uid (59999) when we run as root, never to host root.
- Filesystem: a read-only root (host /usr, a clean Python runtime, the image layer, a
  synthetic /etc); /work and /tmp are the only writable places. No host path is
  writable; /proc is the namespace's own; /dev has only null/zero/full/random/urandom/tty.
- No capabilities, no_new_privs, and a seccomp filter (ptrace, process_vm_*, mount and
  the new mount API, unshare/setns/namespace clone flags, keyctl, bpf,
  perf_event_open, module loading, kexec, reboot, swap, userfaultfd, file handles).
- Limits: cgroup memory and pids (v1 or v2), rlimits for CPU, file size, open files;
  wall time by killing the pid namespace's pid 1 (which kills every process in it,
  setsid daemons included) plus a cgroup sweep. `ExecResult.enforcement` names the
  mechanism for each limit.
- The host reads results without trusting the sandbox: capped output, listings by lstat,
  reads with O_NOFOLLOW on every path component.

Not covered: kernel exploits (namespaces and seccomp reduce, not remove, kernel attack
surface), CPU side channels (Spectre-class, cache timing) and covert channels between
concurrent executions, denial of service through shared kernel resources not under a
cgroup (e.g. inotify watches, dentry cache), and the host's own /usr content being
readable (it is the base image by design). Pooled executions of one warm slot share
the slot's user namespace only (one execution at a time; each gets fresh mount, pid,
net, ipc and uts namespaces, /dev/shm, /tmp and /work; see docs/sandbox.md). A session step can lie about its
own result. See docs/sandbox.md.
"""

from posttrain.sandbox.pool import SandboxPool, default_sandbox
from posttrain.sandbox.protocol import Sandbox, Session
from posttrain.sandbox.session import BudgetExceeded, ShellSession

__all__ = ["BudgetExceeded", "Sandbox", "SandboxPool", "Session", "ShellSession", "default_sandbox"]
