"""`posttrain serve` vs `transformers serve`: streaming clients at 1, 8 and 32 at once.

    .venv/bin/python benchmarks/serve_bench.py [--models tiny,smollm2] [--clients 1,8,32] [--max-tokens 64]

For each model (the tiny default saved to a temporary directory; SmolLM2-135M-Instruct
from --smollm2-dir, default models/smollm2, converted by `posttrain models get`),
each server is started as its own process on a free loopback port, CPU, fp32, and
driven in turn by the same clients (the servers never run at the same time): C clients,
each sending `--requests` streaming chat requests one after another (distinct short
prompts, temperature 1, seed per request, `max_tokens` new tokens). Output tokens are
each server's own count (`usage.completion_tokens` of the stream, `stream_options:
include_usage`); output tokens/s = all clients' tokens / wall time of the round; TTFT =
request sent to the first chunk with non-empty content (or to the end of a reply that
has none), p50 over all requests. A round is cut after `--window-s` (default 90 s):
replies still streaming count their content chunks as tokens, and requests with no
token yet count the window as their TTFT, so a cut round's p50 TTFT is a lower bound.
`transformers serve` runs with its defaults plus `--continuous-batching` when
`--hf-cb` is given (its paged-attention scheduler; off by default in transformers).
Machine load is printed: on a shared machine the numbers move with it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(kind: str, model_dir: str, port: int, hf_cb: bool, threads: int) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    if kind == "posttrain":
        cmd = [sys.executable, "-m", "posttrain.cli.main", "serve", model_dir, "--port", str(port),
               "--max-batch", "32", "--max-len", "512", "--name", "m"]
    else:
        cmd = [str(Path(sys.executable).parent / "transformers"), "serve", model_dir, "--port", str(port),
               "--host", "127.0.0.1", "--device", "cpu", "--dtype", "float32"] + (["--continuous-batching"] if hf_cb else [])
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server did not come up")


async def one_request(http: httpx.AsyncClient, model: str, prompt: str, max_tokens: int, seed: int,
                      progress: dict | None = None) -> tuple[float, int]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "max_tokens": max_tokens, "temperature": 1.0, "seed": seed, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, text, used = None, [], 0
    async with http.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            obj = json.loads(line[6:])
            used = (obj.get("usage") or {}).get("completion_tokens", used)
            for ch in obj.get("choices", []):
                piece = (ch.get("delta") or {}).get("content") or ""
                if piece:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                        if progress is not None:
                            progress["ttft"].append(ttft)
                    text.append(piece)
                    if progress is not None:
                        progress["chunks"][seed] = len(text)
    return (ttft if ttft is not None else time.perf_counter() - t0), used


async def round_(url: str, model: str, clients: int, requests: int, max_tokens: int, window_s: float) -> dict:
    """One round; past `window_s` it is cut: unfinished replies count their streamed chunks as
    tokens, and requests with no token yet count the window as their TTFT (a lower bound)."""
    progress: dict = {"ttft": [], "chunks": {}, "done": {}}
    async with httpx.AsyncClient(base_url=url, timeout=3600, limits=httpx.Limits(max_connections=clients + 4)) as http:
        async def client(c: int) -> None:
            for i in range(requests):
                seed = 1000 * (c + 1) + i
                _, n = await one_request(http, model, f"Tell me about topic {c}-{i}.", max_tokens, seed, progress)
                progress["done"][seed] = n

        await one_request(http, model, "warm up", 4, 0)
        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(client(c)) for c in range(clients)]
        _, pending = await asyncio.wait(tasks, timeout=window_s)
        wall = time.perf_counter() - t0
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    tokens = sum(progress["done"].values()) + sum(n for s, n in progress["chunks"].items() if s not in progress["done"])
    ttft = progress["ttft"] + [wall] * (clients * requests - len(progress["ttft"]))
    return {"tok_s": tokens / wall, "p50_ttft_s": statistics.median(ttft), "tokens": tokens, "wall_s": wall,
            "cut": bool(pending)}


def bench_model(name: str, model_dir: str, args: argparse.Namespace) -> list[dict]:
    rows = []
    for kind in ("posttrain", "transformers"):
        port = free_port()
        proc = start(kind, model_dir, port, args.hf_cb, args.threads)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_up(url, proc)
            model = "m" if kind == "posttrain" else model_dir
            for c in args.clients:
                r = asyncio.run(round_(url, model, c, args.requests, args.max_tokens, args.window_s))
                rows.append({"model": name, "server": kind, "clients": c, **r})
                print(f"{name:8s} {kind:12s} clients={c:3d} {r['tok_s']:8.1f} tok/s  p50 TTFT {r['p50_ttft_s']*1e3:8.1f} ms"
                      f"  ({r['tokens']} tokens in {r['wall_s']:.1f}s{', cut at the window' if r['cut'] else ''})",
                      flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,smollm2")
    ap.add_argument("--smollm2-dir", default="models/smollm2")
    ap.add_argument("--clients", default="1,8,32", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--requests", type=int, default=2, help="streaming requests per client, one after another")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window-s", type=float, default=90.0, help="a round is cut after this long (see round_)")
    ap.add_argument("--hf-cb", action="store_true", help="transformers serve --continuous-batching")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name == "tiny":
                from posttrain.models import save_policy
                from posttrain.models.tiny import build_tiny

                model_dir = str(Path(tmp) / "tiny")
                save_policy(*build_tiny(seed=0), model_dir)
            else:
                model_dir = args.smollm2_dir
            rows += bench_model(name, model_dir, args)
    print("\n| model | clients | posttrain tok/s | transformers tok/s | ratio | posttrain p50 TTFT | transformers p50 TTFT | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for c in args.clients:
            ours = next(r for r in rows if r["model"] == name and r["server"] == "posttrain" and r["clients"] == c)
            hf = next(r for r in rows if r["model"] == name and r["server"] == "transformers" and r["clients"] == c)
            print(f"| {name} | {c} | {ours['tok_s']:.1f} | {hf['tok_s']:.1f} | {ours['tok_s'] / hf['tok_s']:.1f}x | "
                  f"{ours['p50_ttft_s']*1e3:.0f} ms | {hf['p50_ttft_s']*1e3:.0f} ms | "
                  f"{ours['p50_ttft_s'] / hf['p50_ttft_s']:.2f}x{' (cut: TTFT a lower bound)' if hf['cut'] else ''} |")
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
