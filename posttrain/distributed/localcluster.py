"""A real two-node Ray cluster on loopback, for tests and benchmarks: `ray start` twice.

    with LocalCluster(nodes={"pt_node_a": 2, "pt_node_b": 2}) as c:   # name -> CPUs
        cfg.cluster.address = c.address                               # "127.0.0.1:<port>"
        c.kill_raylet("pt_node_b")                                     # a node dies
    # every process of the cluster is gone here, even after a failure

Each node is a separate `ray start` (head, then `--address` joins) with its own CPUs
and a custom resource named after it, so placement can target it. Everything binds to
127.0.0.1: Ray 2.x rewrites a loopback `--node-ip-address` into the machine's
routable address, so the nodes are started through this module (`python -m
posttrain.distributed.localcluster start ...`), which is Ray's own CLI with that one
rewrite switched off. Teardown kills, by pid, exactly the processes whose command
line names this cluster's private temp dir; it never touches another Ray on the machine.

Limits: for one machine only (loopback); not a deployment tool.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Generous start-up waits: a loaded 2-core laptop starts a Ray node's agents slowly.
ENV = {"RAY_agent_register_timeout_ms": "300000", "RAY_raylet_start_wait_time_s": "300",
       "RAY_health_check_period_ms": "2000", "RAY_health_check_failure_threshold": "5",
       "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}


def _free_ports(n: int, taken: set[int]) -> list[int]:
    """n distinct free ports, none in `taken` (which grows by them). The sockets stay bound
    until all n are drawn: released one by one, the kernel may hand the same port out twice,
    and Ray refuses a start whose components share a port (seen in CI)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in taken:
                ports.append(port)
                taken.add(port)
    finally:
        for s in socks:
            s.close()
    return ports


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


class LocalCluster:
    def __init__(self, nodes: dict[str, int], object_store_mb: int = 128, timeout_s: float = 300.0) -> None:
        self.nodes, self.object_store_mb, self.timeout_s = nodes, object_store_mb, timeout_s
        self.tmp = Path(tempfile.mkdtemp(prefix="ptray-", dir="/tmp"))  # short: unix socket paths
        self._ports: set[int] = set()  # every port handed to this cluster, so none repeats
        self.port = _free_ports(1, self._ports)[0]
        self.address = f"127.0.0.1:{self.port}"
        # pidfds of a killed raylet's workers: held, not pids, because stop() may come a minute
        # later and pids wrap fast (pid_max 32768, a test suite starts thousands of processes): a
        # remembered pid could by then name someone else's process.
        self._orphans: dict[int, int] = {}  # pid -> pidfd

    def _ray(self, *args: str) -> None:
        env = {**os.environ, **ENV}
        cmd = [sys.executable, "-m", "posttrain.distributed.localcluster", *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.timeout_s)
        if p.returncode != 0:
            tail = (p.stdout + p.stderr).strip().splitlines()[-5:]
            raise RuntimeError(f"`ray {' '.join(args[:2])}` failed (rc={p.returncode}): " + " | ".join(tail))

    def start(self) -> "LocalCluster":
        common = ["--node-ip-address=127.0.0.1", f"--temp-dir={self.tmp}", "--disable-usage-stats",
                  f"--object-store-memory={self.object_store_mb << 20}", "--include-log-monitor=false"]
        for i, (name, cpus) in enumerate(self.nodes.items()):
            res = f"--resources={json.dumps({name: 1})}"
            # Fixed agent ports: with port 0 the raylet waits only 30 s for the agents to
            # report theirs, which a loaded laptop can miss; a given port needs no report.
            keys = ("dashboard-agent-grpc-port", "dashboard-agent-listen-port",
                    "runtime-env-agent-port", "metrics-export-port")
            ports = [f"--{k}={p}" for k, p in zip(keys, _free_ports(len(keys), self._ports))]
            if i == 0:  # the head's Ray client server too: its default port 10001 is one per machine
                client = f"--ray-client-server-port={_free_ports(1, self._ports)[0]}"
                self._ray("start", "--head", f"--port={self.port}", f"--num-cpus={cpus}", res,
                          "--include-dashboard=false", client, *common, *ports)
            else:
                self._ray("start", f"--address={self.address}", f"--num-cpus={cpus}", res, *common, *ports)
        return self

    def pids(self) -> list[int]:
        """Every live process of this cluster: those whose command line names our temp dir or
        `--address=` ours (the head's Ray client server names only the address, and outlives its
        parent), and their descendants (Ray renames its workers `ray::...`, hiding the temp dir)."""
        keys, mine, parent = (str(self.tmp).encode(), f"--address={self.address}".encode()), set(), {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                cmdline = (d / "cmdline").read_bytes()
                if any(k in cmdline for k in keys):
                    mine.add(int(d.name))
                parent[int(d.name)] = _ppid(int(d.name))
            except OSError:
                continue
        grew = True
        while grew:
            new = {p for p, pp in parent.items() if pp in mine and p not in mine}
            mine |= new
            grew = bool(new)
        return sorted(mine)

    def raylet_pid(self, node: str) -> int:
        for pid in self.pids():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"/raylet") and any(node.encode() in a for a in cmd):
                return pid
        raise RuntimeError(f"no raylet for node {node!r} in {self.tmp}")

    def kill_raylet(self, node: str) -> int:
        """SIGKILL that node's raylet; its workers (which then exit) are held by pidfd for stop()."""
        pid = self.raylet_pid(node)
        for p in self.pids():
            if _ppid(p) == pid and p not in self._orphans:
                try:
                    self._orphans[p] = os.pidfd_open(p)
                except ProcessLookupError:
                    pass
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> None:
        """SIGKILL every process of this cluster (a killed raylet's workers by their pidfds, the rest as
        found in /proc just before), then remove its temp dir."""
        for fd in self._orphans.values():
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(fd)
        self._orphans.clear()
        for _ in range(5):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _ray_cli() -> None:
    """Ray's CLI with the loopback rewrite off (see the module docstring)."""
    import ray._private.services as services

    services.resolve_ip_for_localhost = lambda host: host
    from ray.scripts.scripts import main

    sys.argv = ["ray", *sys.argv[1:]]
    main()


if __name__ == "__main__":
    _ray_cli()
