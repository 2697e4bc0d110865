"""One cgroup per execution (or per warm slot): memory, pids and CPU accounting, and kill-all.

Works with cgroup v2 (unified) and with v1 controllers mounted separately (as on this
machine: memory, pids, cpuacct under /sys/fs/cgroup/<controller>). Child cgroups are
created beneath the cgroup this process already lives in, so the sandbox stays inside
whatever budget the host gave us. If nothing is writable, `Cgroup.create` returns None
and the caller falls back to rlimits (and reports that it did).

On a v1 host that also mounts the unified (v2) hierarchy at /sys/fs/cgroup/unified (a
"hybrid" layout, as here), each cgroup gets a twin there too ("psi"): v2 keeps per-cgroup
CPU pressure (cpu.pressure) and usage (cpu.stat) even with no controller enabled, which
is how `overload.py` tells a starved program from one that sleeps or stops itself.

Cleanup on every exit path: `Cgroup.remove` on a normal close, an atexit hook for pools
nobody closed, `reaper.py` (a small process started with the first cgroup, which removes
this process's cgroups when it dies, kill -9 included) and `sweep_stale` at start.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from functools import lru_cache
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
UNIFIED = ROOT / "unified"  # the v2 hierarchy of a hybrid v1 host
_counter = itertools.count()


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text()
    except OSError:
        return default


def _write(path: Path, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


@lru_cache(maxsize=1)
def _own_paths() -> dict[str, str]:
    """controller ('' for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _id, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            out[c] = path
    return out


@lru_cache(maxsize=1)
def kind() -> str:
    """'v2', 'v1' or '' (unusable)."""
    own = _own_paths()
    if (ROOT / "cgroup.controllers").exists():
        return "v2" if os.access(ROOT / own.get("", "/").lstrip("/"), os.W_OK) else ""
    if "memory" in own and os.access(ROOT / "memory" / own["memory"].lstrip("/"), os.W_OK):
        return "v1"
    return ""


@lru_cache(maxsize=1)
def psi_parent() -> Path | None:
    """Where a v1 host's per-cgroup pressure twin goes (our own unified cgroup), or None."""
    if kind() != "v1" or not (UNIFIED / "cgroup.procs").exists():
        return None
    d = UNIFIED / _own_paths().get("", "/").lstrip("/")
    return d if os.access(d, os.W_OK) and (d / "cgroup.procs").exists() else None


def name_prefix(pid: int) -> str:
    """Every cgroup a process creates is named `posttrain-<pid>-<n>` (what the reaper and sweep match)."""
    return f"posttrain-{pid}-"


class Cgroup:
    """A set of per-controller directories acting as one cgroup."""

    def __init__(self, dirs: dict[str, Path], version: str) -> None:
        self.dirs = dirs  # controller -> directory ('' for v2)
        self.version = version
        self._oom0: int | None = None  # oom_kill count when the current budget was set
        # A warm slot reads and writes the same few files around every execution: keep them
        # open (pread/pwrite at offset 0) and skip limit writes that would not change anything.
        self._fds: dict[str, int] = {}
        self._written: dict[str, str] = {}
        self._paths: dict[tuple[str, str], str] = {}  # (controller, file) -> path: no pathlib per call

    def _f(self, ctrl: str, name: str) -> str:
        path = self._paths.get((ctrl, name))
        if path is None:
            path = self._paths[(ctrl, name)] = os.path.join(self.dirs[ctrl], name)
        return path

    def _fd(self, path: str, flags: int) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, flags | os.O_CLOEXEC)
        return fd

    def _pread(self, path: str, default: str = "") -> str:
        try:
            return os.pread(self._fd(path, os.O_RDONLY), 1 << 16, 0).decode()
        except OSError:
            self._close(path)
            return default

    def _pwrite(self, path: str, value: str, always: bool = False) -> bool:
        if not always and self._written.get(path) == value:
            return True
        try:
            os.pwrite(self._fd(path, os.O_WRONLY), value.encode(), 0)
        except OSError:
            self._close(path)
            self._written.pop(path, None)
            return False
        self._written[path] = value
        return True

    def _close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close_files(self) -> None:
        for path in list(self._fds):
            self._close(path)

    @classmethod
    def create(cls, memory_bytes: int, pids: int) -> "Cgroup | None":
        version = kind()
        if not version:
            return None
        import posttrain.sandbox.reaper as reaper

        reaper.ensure_started()  # before the first mkdir: a kill -9 from here on leaves nothing
        own = _own_paths()
        name = f"{name_prefix(os.getpid())}{next(_counter)}"
        ctrls = [""] if version == "v2" else [c for c in ("memory", "pids", "cpuacct") if c in own]
        targets = {c: (ROOT / c / own[c].lstrip("/") / name if c else ROOT / own[""].lstrip("/") / name) for c in ctrls}
        if version == "v1" and psi_parent() is not None:
            targets["psi"] = psi_parent() / name
        dirs: dict[str, Path] = {}
        for c, d in targets.items():
            try:
                d.mkdir()
            except OSError:
                continue
            dirs[c] = d
        cg = cls(dirs, version)
        if not cg.has("memory"):
            cg.remove()
            return None
        cg.set_limits(memory_bytes, pids)
        return cg

    def has(self, what: str) -> bool:
        if self.version == "v2":
            return "" in self.dirs
        return what in self.dirs

    def set_limits(self, memory_bytes: int, pids: int) -> None:
        if self.version == "v2":
            self._pwrite(self._f("", "memory.max"), str(memory_bytes))
            self._pwrite(self._f("", "memory.swap.max"), "0")
            self._pwrite(self._f("", "pids.max"), str(pids))
        else:
            # v1 keeps memory <= memsw at every moment: raise memsw first, lower it last
            old = int(self._written.get(self._f("memory", "memory.limit_in_bytes"), "0"))
            order = ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            for name in order if memory_bytes > old else order[::-1]:
                self._pwrite(self._f("memory", name), str(memory_bytes))
            self._pwrite(self._f("memory", "memory.max_usage_in_bytes"), "0", always=True)  # reset the peak
            if "pids" in self.dirs:
                self._pwrite(self._f("pids", "pids.max"), str(pids))
        if self._oom0 is None:  # later baselines come from oom_since_reset's own read
            self._oom0 = self.oom_kills()

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            _write(d / "cgroup.procs", str(pid))

    def procs(self) -> list[int]:
        # Opened afresh on every call: cgroup v1 caches the pid list per open file, so a
        # kept-open cgroup.procs keeps listing processes that are already gone.
        seen: set[int] = set()
        for d in self.dirs.values():
            seen.update(int(x) for x in _read(d / "cgroup.procs").split())
        return sorted(seen)

    def oom_kills(self) -> int:
        c = "" if self.version == "v2" else "memory"
        if c not in self.dirs:
            return 0
        text = self._pread(self._f(c, "memory.events" if self.version == "v2" else "memory.oom_control"))
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def oom_since_reset(self) -> bool:
        """OOM kills since the last call (or since the first set_limits); re-arms itself."""
        now = self.oom_kills()
        hit = now > (self._oom0 if self._oom0 is not None else now)
        self._oom0 = now
        return hit

    def count_procs(self) -> int:
        """Processes in the cgroup, from one controller (every pid is added to all of them)."""
        c = "" if self.version == "v2" else "memory"
        path = self._f(c if c in self.dirs else next(iter(self.dirs)), "cgroup.procs")
        try:  # opened afresh (see procs); os-level: this runs before every warm execution
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return 0
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        except OSError:
            return 0
        finally:
            os.close(fd)
        return len(b"".join(chunks).split())

    def usage(self) -> int:
        if self.version == "v2":
            return int(self._pread(self._f("", "memory.current"), "0") or 0)
        return int(self._pread(self._f("memory", "memory.usage_in_bytes"), "0") or 0)

    def pinned_bytes(self) -> int:
        """anon + shmem (tmpfs) pages of the cgroup: what reclaim cannot take back."""
        c = "" if self.version == "v2" else "memory"
        if c not in self.dirs:
            return 0
        keys = ("anon", "shmem") if self.version == "v2" else ("rss", "shmem")
        total = 0
        for line in self._pread(self._f(c, "memory.stat")).splitlines():
            k, _, v = line.partition(" ")
            if k in keys:
                total += int(v)
        return total

    def peak_memory(self) -> int:
        if self.version == "v2":
            return int(self._pread(self._f("", "memory.peak"), "0") or 0)
        return int(self._pread(self._f("memory", "memory.max_usage_in_bytes"), "0") or 0)

    def _psi_dir(self) -> Path | None:
        return self.dirs.get("psi") or (self.dirs.get("") if self.version == "v2" else None)

    def _psi_key(self) -> str | None:
        if "psi" in self.dirs:
            return "psi"
        return "" if self.version == "v2" and "" in self.dirs else None

    def cpu_wait_seconds(self) -> float | None:
        """Total time this cgroup made no progress for want of a CPU: cpu.pressure 'full' (on
        each CPU, its runnable processes all waiting, none running), or 'some' where the
        kernel reports no 'full'; None where it keeps no per-cgroup pressure. A sleeping or
        stopped process is not runnable, and one of its own processes running while its
        siblings wait is progress, so neither adds to this."""
        c = self._psi_key()
        if c is None:
            return None
        totals = {}
        for line in self._pread(self._f(c, "cpu.pressure")).splitlines():
            kind_, _, rest = line.partition(" ")
            if "total=" in rest:
                totals[kind_] = int(rest.rsplit("total=", 1)[1]) / 1e6
        return totals.get("full", totals.get("some"))

    def cpu_seconds(self) -> float | None:
        c = self._psi_key()
        if c is not None:
            for line in self._pread(self._f(c, "cpu.stat")).splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
            if self.version == "v2":
                return None
        if "cpuacct" in self.dirs:
            return int(_read(self.dirs["cpuacct"] / "cpuacct.usage", "0") or 0) / 1e9
        return None

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process until the cgroup is empty. True when empty."""
        psi = self._psi_dir()
        if psi is not None:
            _write(psi / "cgroup.kill", "1")  # v2 (or the v1 host's unified twin): one write kills all
        end, pause = time.monotonic() + deadline_s, 0.0002
        while True:
            pids = self.procs()
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > end:
                return False
            time.sleep(pause)
            pause = min(2 * pause, 0.004)  # dying processes usually take well under a millisecond

    def remove(self) -> bool:
        """Kill what is left and delete the directories. True when nothing is left behind."""
        ok = self.kill_all()
        self.close_files()
        for d in self.dirs.values():
            end, pause = time.monotonic() + 1.0, 0.0002
            while True:  # EBUSY until the kernel has finished taking the last task out
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > end:
                        ok = False
                        break
                    time.sleep(pause)
                    pause = min(2 * pause, 0.005)
        return ok


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _parents(version: str) -> list[Path]:
    """The directories our cgroups are made in, one per hierarchy."""
    own = _own_paths()
    if version == "v2":
        parents = [ROOT / own[""].lstrip("/")]
    else:
        parents = [ROOT / c / own[c].lstrip("/") for c in ("memory", "pids", "cpuacct") if c in own]
    if psi_parent() is not None:
        parents.append(psi_parent())
    return parents


def sweep_stale() -> int:
    """Remove cgroups left by a posttrain process that died without cleaning up. Returns count."""
    version = kind()
    if not version:
        return 0
    parents = _parents(version)
    # Also siblings of our own cgroup: a launcher that puts each job in its own cgroup
    # (as here) leaves a dead job's posttrain cgroups next to ours, not under it.
    parents += [p.parent / "*" for p in parents if p.parent != ROOT and p.parent.parent != ROOT]
    removed = 0
    for parent in parents:
        for d in parent.parent.glob(f"{parent.name}/posttrain-*-*") if parent.name == "*" else parent.glob("posttrain-*-*"):
            try:
                pid = int(d.name.split("-")[1])
            except ValueError:
                continue
            if not _pid_alive(pid) and Cgroup({"x": d}, version).remove():
                removed += 1
    return removed


def remove_all_of(pid: int) -> int:
    """Remove every cgroup process `pid` created (the reaper calls this once `pid` is gone)."""
    version = kind()
    if not version:
        return 0
    removed = 0
    for parent in _parents(version):
        for d in parent.glob(f"{name_prefix(pid)}*"):
            removed += Cgroup({"x": d}, version).remove()
    return removed
