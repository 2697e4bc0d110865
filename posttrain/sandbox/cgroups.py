"""One cgroup per execution (or per warm slot): memory, pids and CPU accounting, and kill-all.

Works with cgroup v2 (unified) and with v1 controllers mounted separately (as on this
machine: memory, pids, cpuacct under /sys/fs/cgroup/<controller>). Child cgroups are
created beneath the cgroup this process already lives in, so the sandbox stays inside
whatever budget the host gave us. If nothing is writable, `Cgroup.create` returns None
and the caller falls back to rlimits (and reports that it did).
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from functools import lru_cache
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
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


class Cgroup:
    """A set of per-controller directories acting as one cgroup."""

    def __init__(self, dirs: dict[str, Path], version: str) -> None:
        self.dirs = dirs  # controller -> directory ('' for v2)
        self.version = version
        self._oom0: int | None = None  # oom_kill count when the current budget was set
        # A warm slot reads and writes the same few files around every execution: keep them
        # open (pread/pwrite at offset 0) and skip limit writes that would not change anything.
        self._fds: dict[Path, int] = {}
        self._written: dict[Path, str] = {}

    def _fd(self, path: Path, flags: int) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, flags | os.O_CLOEXEC)
        return fd

    def _pread(self, path: Path, default: str = "") -> str:
        try:
            return os.pread(self._fd(path, os.O_RDONLY), 1 << 16, 0).decode()
        except OSError:
            self._close(path)
            return default

    def _pwrite(self, path: Path, value: str, always: bool = False) -> bool:
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

    def _close(self, path: Path) -> None:
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
        own = _own_paths()
        name = f"posttrain-{os.getpid()}-{next(_counter)}"
        ctrls = [""] if version == "v2" else [c for c in ("memory", "pids", "cpuacct") if c in own]
        dirs: dict[str, Path] = {}
        for c in ctrls:
            d = ROOT / c / own[c].lstrip("/") / name if c else ROOT / own[""].lstrip("/") / name
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
            d = self.dirs[""]
            self._pwrite(d / "memory.max", str(memory_bytes))
            self._pwrite(d / "memory.swap.max", "0")
            self._pwrite(d / "pids.max", str(pids))
        else:
            m = self.dirs["memory"]
            # v1 keeps memory <= memsw at every moment: raise memsw first, lower it last
            old = int(self._written.get(m / "memory.limit_in_bytes", "0"))
            order = ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            for name in order if memory_bytes > old else order[::-1]:
                self._pwrite(m / name, str(memory_bytes))
            self._pwrite(m / "memory.max_usage_in_bytes", "0", always=True)  # reset the peak
            if "pids" in self.dirs:
                self._pwrite(self.dirs["pids"] / "pids.max", str(pids))
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
        d = self.dirs.get("" if self.version == "v2" else "memory")
        if d is None:
            return 0
        text = self._pread(d / ("memory.events" if self.version == "v2" else "memory.oom_control"))
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
        d = self.dirs.get("" if self.version == "v2" else "memory") or next(iter(self.dirs.values()))
        return len(_read(d / "cgroup.procs").split())

    def usage(self) -> int:
        if self.version == "v2":
            return int(self._pread(self.dirs[""] / "memory.current", "0") or 0)
        return int(self._pread(self.dirs["memory"] / "memory.usage_in_bytes", "0") or 0)

    def peak_memory(self) -> int:
        if self.version == "v2":
            return int(self._pread(self.dirs[""] / "memory.peak", "0") or 0)
        return int(self._pread(self.dirs["memory"] / "memory.max_usage_in_bytes", "0") or 0)

    def cpu_seconds(self) -> float | None:
        if self.version == "v2":
            for line in _read(self.dirs[""] / "cpu.stat").splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
            return None
        if "cpuacct" in self.dirs:
            return int(_read(self.dirs["cpuacct"] / "cpuacct.usage", "0") or 0) / 1e9
        return None

    def kill_all(self, deadline_s: float = 5.0) -> bool:
        """SIGKILL every process until the cgroup is empty. True when empty."""
        if self.version == "v2" and _write(self.dirs[""] / "cgroup.kill", "1"):
            pass
        end = time.monotonic() + deadline_s
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
            time.sleep(0.002)

    def remove(self) -> bool:
        """Kill what is left and delete the directories. True when nothing is left behind."""
        ok = self.kill_all()
        self.close_files()
        for d in self.dirs.values():
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
            else:
                ok = False
        return ok


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale() -> int:
    """Remove cgroups left by a posttrain process that died without cleaning up. Returns count."""
    version = kind()
    if not version:
        return 0
    own = _own_paths()
    parents = [ROOT / own[""].lstrip("/")] if version == "v2" else [ROOT / c / own[c].lstrip("/") for c in ("memory", "pids", "cpuacct") if c in own]
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
