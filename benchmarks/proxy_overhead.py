"""Per-call overhead of the token-capturing proxy over a direct `engine.generate` call.

    .venv/bin/python benchmarks/proxy_overhead.py [--calls 40] [--max-tokens 8] [--direct-runs 3]

What is measured, per model call of an episode:

    call - direct = the proxy call's wall time in the agent process
                    - the wall time of a direct `engine.generate` with the same prompt ids and
                      SamplingParams on the same engine, from the same prefix-cache state
    null          = the client's own cost: the same client sending the same request to a null
                    server, which runs that direct `generate` in its handler and answers a fixed
                    reply at once; its wall time in the agent minus that `generate`'s: request
                    building, one loopback round trip, reading the reply, all of it with the client
                    waiting as long as for a model call (which an agent pays against any server)
    net           = (call - direct) - null: what the proxy adds

Setup: one server process (tiny default model, `fast` engine, greedy, `--max-tokens` new
tokens, the proxy behind a real uvicorn server on a loopback port, the null server on another)
and two agent processes with the same client, one talking to the proxy, one to the null server.
The proxy agent drives one episode: each call sends the whole history so far plus one new tool
message, with the task's tool schema (as examples/agents/react_agent.py does), so every call
takes the proxy's continuation path (exact previous ids + the new message's ids); the null agent
keeps the same history (the proxy's replies). The processes take turns over pipes, so nothing
else runs while one is timed. For call i:

  1. the prefix cache is emptied and re-filled with call i-1's prompt and completion (one
     `generate` of those ids on the engine-loop thread, the last sampled token excepted): the
     state a real episode is in, its earlier turns cached (call 0 starts empty);
  2. the proxy agent makes call i and reports its wall time (`t0` before building the request,
     `t1` after reading the reply's text); the ids and SamplingParams the engine loop received
     are recorded at `EngineLoop.submit`;
  3. `--direct-runs` times: step 1's cache state again, then the null agent makes call i; the
     null server times `generate` (the body of `engine.generate`, `_generate`, inside the
     engine's lock) on step 2's ids and params. The median of those is the call's direct time,
     the median of the null calls' (wall - generate) its null.

So the direct call runs where the proxy's engine work runs, right after a request arrived at an
idle server, and the client waits the same time in both: the two paths differ by the proxy's own
work (HTTP routing, parsing, prompt building, the hand-offs to and from the engine-loop thread,
the reply). Per row: median and p90 over the calls; the first 3 calls of each episode are dropped.
For reference, `generate` is also timed back to back after the cache fill on the engine-loop
thread, nothing between (warm caches, which a call after an idle moment does not find): the
script prints how much faster that is; against it every net would be about that much larger.

Rows, each its own episode:
  proxy, http.client    the standard library's keep-alive HTTP client, the lightest there is
  proxy, httpx          httpx (the transport under the openai client)
  proxy, openai client  the official `openai` client (its own request building and response
                        parsing cost more than the proxy: see its null line)
  plain route, openai   `/v1/chat/completions`, no capture, the whole history re-rendered
  in-server             (proxy rows) the request's body received to the reply's ids recorded
                        (`CapturedCall.wall_s`) minus the direct time: the proxy's own work and its
                        two hand-offs to and from the engine-loop thread; no HTTP, no client
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

AGENT = textwrap.dedent("""
    import http.client, json, sys, time
    from urllib.parse import urlsplit
    import httpx, openai
    base, mode, max_tokens, tools = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    raw = httpx.Client(timeout=60)
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port)  # keep-alive, as httpx and openai keep theirs
    msgs, i = [{"role": "user", "content": "What is 2*3?"}], 0
    for line in sys.stdin:  # "call": one timed call; else the proxy's reply text: the history moves on
        cmd = json.loads(line)
        if cmd != "call":
            msgs, i = msgs + [{"role": "assistant", "content": cmd}, {"role": "tool", "content": f"obs {i}"}], i + 1
            continue
        body = {"model": "tiny", "messages": msgs, "tools": tools, "temperature": 0, "max_tokens": max_tokens}
        t0 = time.perf_counter()
        if mode == "stdlib":
            conn.request("POST", u.path + "/chat/completions", json.dumps(body), {"content-type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200, data
            text = json.loads(data)["choices"][0]["message"]["content"]
        elif mode == "raw":
            r = raw.post(base + "/chat/completions", json=body)
            r.raise_for_status()
            text = r.json()["choices"][0]["message"]["content"]
        else:
            text = client.chat.completions.create(**body).choices[0].message.content
        wall = time.perf_counter() - t0
        print(json.dumps({"wall": wall, "text": text}), flush=True)
""")

WARMUP = 3


def null_app(eng, job: dict):
    """A server that reads the body, runs `generate` on `job["rec"]`'s ids and params in its handler (timed,
    the engine's lock taken first, into `job["times"]`), then answers with a fixed one-word reply."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from posttrain.rollout.engine import GenRequest

    body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "tiny",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

    async def chat(request):
        await request.body()
        rec = job["rec"]
        with eng._lock:
            t0 = time.perf_counter()
            eng._generate([GenRequest(tuple(rec[0]), rec[1])])
            job["times"].append(time.perf_counter() - t0)
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


class Agent:
    """One agent process and its episode's history."""

    def __init__(self, url_base: str, mode: str, args, tools: list) -> None:
        self.mode = mode
        self.proc = subprocess.Popen([sys.executable, "-c", AGENT, url_base, mode, str(args.max_tokens),
                                      json.dumps(tools)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, cmd) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def call(self) -> tuple[float, str]:
        """One call with the current history: (its wall time in the agent, the reply's text)."""
        self.send("call")
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the agent process ({self.mode}) exited early with status {self.proc.wait()}")
        out = json.loads(line)
        return out["wall"], out["text"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40, help="timed calls per row (after 3 warm-up calls)")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--direct-runs", type=int, default=3, help="null calls and direct engine calls per call")
    args = ap.parse_args()
    import torch

    from posttrain.models.tiny import TinyModelConfig, build_tiny
    from posttrain.rollout.agent.tools import tools_for_task
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.capture import EpisodeRegistry
    from posttrain.serve.server import BackgroundServer
    from posttrain.serve.service import ServeState
    from posttrain.types import Environment, Limits, Message, Spec, Task

    torch.set_num_threads(1)
    model, tok = build_tiny(TinyModelConfig(max_position_embeddings=4096), seed=0)
    eng = FastEngine(model, tok, max_batch=4)
    state = ServeState.create(eng, tok, "tiny")
    state.episodes = EpisodeRegistry()
    task = Task(id="t", domain="tools", prompt=(Message("user", "hi"),), verifier=Spec("math_answer", {"answer": "1"}),
                environment=Environment(tools=("calculator",)), limits=Limits(max_steps=10**6))
    tools = [t.openai_schema() for t in tools_for_task(task).values()]

    seen: list[list] = []  # what the engine loop received, in order: [prompt ids, params, completion ids]
    submit = state.loop.submit

    def spy(req, sink):
        rec = [req.prompt_ids, req.params, ()]
        seen.append(rec)

        def record(ev):
            if ev[0] == "done":
                rec[2] = ev[2].token_ids
            sink(ev)

        return submit(req, record)

    state.loop.submit = spy
    warm = SamplingParams(temperature=0.0, max_new_tokens=1)
    aloop = asyncio.new_event_loop()

    def on_loop(fn):  # fn(engine) on the engine-loop thread
        return aloop.run_until_complete(state.loop.call(fn))

    def fill(e, prev: list | None) -> None:
        e.store.clear()
        if prev is not None:
            e._generate([GenRequest(tuple(prev[0]) + tuple(prev[2][:-1]), warm)])

    def cache_as_after(prev: list | None) -> None:
        on_loop(lambda e: fill(e, prev))

    def hot_direct(rec: list, prev: list | None) -> float:
        """For reference: `generate` timed right after the cache fill, on the same thread (nothing between)."""
        def run(e) -> float:
            fill(e, prev)
            t0 = time.perf_counter()
            e._generate([GenRequest(tuple(rec[0]), rec[1])])
            return time.perf_counter() - t0

        return on_loop(run)

    rows = []  # (name, [(call - direct, null, in-server part or None) per timed call])
    direct_s: list[float] = []
    hot_gap: list[float] = []  # direct - hot direct, per call
    job: dict = {"rec": None, "times": []}
    with BackgroundServer(build_app(state)) as url, BackgroundServer(null_app(eng, job)) as null_url:
        for name, mode, path in (("proxy, http.client", "stdlib", "episode"), ("proxy, httpx", "raw", "episode"),
                                 ("proxy, openai client", "openai", "episode"),
                                 ("plain route, openai client", "openai", "plain")):
            ep = state.episodes.open(task, {}, max_calls=10**6) if path == "episode" else None
            agent = Agent(f"{url}/episodes/{ep.id}/v1" if ep is not None else f"{url}/v1", mode, args, tools)
            null = Agent(f"{null_url}/v1", mode, args, tools)
            prev, per_call = None, []
            try:
                for i in range(args.calls + WARMUP):
                    cache_as_after(prev)
                    seen.clear()
                    wall, text = agent.call()
                    [rec] = seen  # the one engine request the call made
                    job["rec"], job["times"], nulls = rec, [], []
                    for _ in range(args.direct_runs):
                        cache_as_after(prev)
                        wall_null = null.call()[0]
                        nulls.append(wall_null - job["times"][-1])  # the null call's wall minus its engine time
                    dt, nl = statistics.median(job["times"]), statistics.median(nulls)
                    if i >= WARMUP:
                        direct_s.append(dt)
                        hot_gap.append(dt - hot_direct(rec, prev))
                        per_call.append((wall - dt, nl, ep.calls[-1].wall_s - dt if ep is not None else None))
                    for a in (agent, null):
                        a.send(text)
                    prev = rec
            finally:
                agent.close()
                null.close()
            rows.append((name, per_call))
    state.close()

    def stats(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"median {statistics.median(xs) * 1e3:6.2f} ms, p90 {xs[int(0.9 * len(xs))] * 1e3:6.2f} ms"

    print(f"direct engine.generate: median {statistics.median(direct_s) * 1e3:.2f} ms ({args.max_tokens} new tokens, "
          f"prompts growing to {len(prev[0])} tokens, earlier turns cached); {args.calls} calls a row")
    print(f"  a direct call right after the cache fill, nothing between, is {statistics.median(hot_gap) * 1e3:.2f} ms "
          "faster (median of the paired differences): against it every net below would be about that much larger")
    for name, per_call in rows:
        print(f"{name:27s} call - direct {stats([o for o, _, _ in per_call])}")
        print(f"{'':27s} null         {stats([n for _, n, _ in per_call])}")
        print(f"{'':27s} net          {stats([o - n for o, n, _ in per_call])}")
        if per_call[0][2] is not None:
            print(f"{'':27s} in-server    {stats([s for _, _, s in per_call])}")


if __name__ == "__main__":
    main()
