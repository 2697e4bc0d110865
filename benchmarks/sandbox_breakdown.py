"""Where a pooled execution's clean state goes: each step of it, alone, inside a real sandbox.

    .venv/bin/python benchmarks/sandbox_breakdown.py [--n 200] [--rounds 3]

Runs a probe inside the zygote's own sandbox (same bwrap, same capabilities, the agent's
own code) that repeats each step N times in a child: plain fork (the floor), the
zygote's clone into new mount/uts/ipc/pid namespaces, + a network namespace, + loopback
up, + the mounts (/proc, /dev/pts, the tmpfs and its three binds), the whole prepare();
and a plain fork once the process holds 16 MiB more Python heap (fork + exit cost grows with the
forking process's memory, and every execution forks the zygote twice); then the host's
and the slot's CPU per pooled snippet execution (`bench_cpu_per_exec`).

CPU ms per step = the children's CPU (rusage) / N: the kernel work of exiting and of
freeing namespaces that kworkers do later is NOT in it (the network namespace's teardown
mostly), so the network steps are lower bounds. Wall ms include waiting on a busy host.
Steps take turns over the rounds, so a change of load touches all alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from posttrain.sandbox.agent_files import agent_dir  # noqa: E402
from posttrain.sandbox.bench import bench_cpu_per_exec  # noqa: E402
from posttrain.sandbox.bwrap import bwrap_argv, fixed_env, run_as  # noqa: E402
from posttrain.sandbox.runtime import PY_INSIDE  # noqa: E402

PROBE = r'''
import json, os, resource, sys, time
sys.path.insert(0, "/opt/posttrain")
import execution as ex
from zygote_main import NS_CLONE, clone_into_namespaces

def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

STEPS = {
    "fork (no namespaces)": (0, lambda: None),
    "clone: mount+uts+ipc+pid ns": (NS_CLONE, lambda: None),
    "+ network ns": (NS_CLONE, lambda: ex._check(ex.libc.unshare(ex.CLONE_NEWNET), "net")),
    "+ network ns + loopback up": (NS_CLONE, lambda: (ex._check(ex.libc.unshare(ex.CLONE_NEWNET), "net"), ex.loopback_up())),
    "whole prepare() (ns, mounts, loopback)": (NS_CLONE, ex.prepare),
}
n, rounds = int(sys.argv[1]), int(sys.argv[2])
acc = {k: [0.0, 0.0] for k in STEPS}
for _ in range(rounds):
    for name, (flags, body) in STEPS.items():
        w0, c0 = time.perf_counter(), cpu()
        for _ in range(n // rounds):
            pid = clone_into_namespaces(flags)
            if pid == 0:
                try:
                    body()
                except BaseException as e:
                    os.write(2, repr(e).encode())
                    os._exit(1)
                os._exit(0)
            _, st = os.waitpid(pid, 0)
            assert st == 0, (name, st)
        acc[name][0] += time.perf_counter() - w0
        acc[name][1] += cpu() - c0
k = (n // rounds) * rounds
out = {name: {"wall_ms": 1e3 * w / k, "cpu_ms": 1e3 * c / k} for name, (w, c) in acc.items()}
# last: 16 MiB more of Python heap (small objects: 4 KiB pages in 256 KiB arenas, as the
# zygote's modules are; one big buffer would get huge pages, which fork copies cheaply)
ballast = [bytes(400) for _ in range(16 << 20 >> 9)]
w0, c0 = time.perf_counter(), cpu()
for _ in range(k):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
out["fork, 16 MiB more Python heap"] = {"wall_ms": 1e3 * (time.perf_counter() - w0) / k, "cpu_ms": 1e3 * (cpu() - c0) / k}
print(json.dumps(out))
'''


def probe(n: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        path = os.path.join(d, "probe.py")
        with open(path, "w") as f:
            f.write(PROBE)
        os.chmod(path, 0o644)
        binds = ("--ro-bind", str(agent_dir()), "/opt/posttrain", "--ro-bind", d, "/opt/probe",
                 "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN")  # fmt: skip
        argv = bwrap_argv([f"{PY_INSIDE}/bin/python3", "/opt/probe/probe.py", str(n), str(rounds)], None, fixed_env(), binds, read_only_dev=True)
        uid = run_as()
        out = subprocess.run(argv, capture_output=True, text=True, user=uid, group=uid, extra_groups=[] if uid is not None else None, env={}, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    steps = probe(a.n, a.rounds)
    floor = steps["fork (no namespaces)"]
    print(f"host load (uptime): {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'step (in a child, then its exit)':<42}{'wall ms':>9}{'cpu ms':>9}{'cpu - fork':>12}")
    for name, r in steps.items():
        print(f"{name:<42}{r['wall_ms']:>9.2f}{r['cpu_ms']:>9.2f}{r['cpu_ms'] - floor['cpu_ms']:>12.2f}")
    cpu = asyncio.run(bench_cpu_per_exec(a.n))
    print("\npooled snippet execution, CPU ms: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))


if __name__ == "__main__":
    main()
