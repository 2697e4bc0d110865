"""Per-call overhead of the token-capturing proxy over a direct `engine.generate` call.

    .venv/bin/python benchmarks/proxy_overhead.py [--calls 60] [--max-tokens 8]

One server process (tiny default model, `fast` engine, greedy, `--max-tokens` new tokens,
the proxy behind a real uvicorn server on a loopback port) and one agent process, as an
external agent runs: the agent drives an episode, each call sending the whole history so
far plus one new tool message, so every call takes the proxy's continuation path (exact
previous ids + the new message's ids). The two processes take turns over a pipe: the agent
makes one call and reports its wall time, then the server process sends the same prompt
ids (as the proxy recorded them) and parameters to `engine.generate` directly, on the same
engine, while the agent waits. The prefix cache is emptied before each of the two, so both
prefill the whole prompt (otherwise the second would find the first's blocks). Overhead = the call's wall time in the agent minus the
direct call's; median and p90 over the calls (3 warm-up calls dropped).

Rows, each its own episode:
  proxy, http.client    the agent posts JSON with the standard library's keep-alive HTTP
                        client, the lightest there is: what the proxy itself adds
  proxy, httpx          the same with httpx (the transport under the openai client)
  proxy, openai client  the same calls through the official `openai` client (adds the
                        client's own request building and response parsing)
  plain route, openai   `/v1/chat/completions`, no capture, the whole history re-rendered
  in-server part        route entry to last token recorded, minus the direct call (no
                        HTTP, no client): prompt building and the engine-loop hand-off
  null server, <client> the same client and history against a server that returns a fixed
                        reply at once (no model): the client's own cost plus one loopback
                        round trip, which an agent pays against any server. The proxy's
                        own share of a row is that row minus its client's null row.
"""

from __future__ import annotations

import argparse
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
    base, mode, n, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    raw = httpx.Client(timeout=60)
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port)  # keep-alive, as httpx and openai keep theirs
    msgs = [{"role": "user", "content": "What is 2*3?"}]
    for i in range(n):
        sys.stdin.readline()  # the server side's turn is over
        body = {"model": "tiny", "messages": msgs, "temperature": 0, "max_tokens": max_tokens}
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
        print(json.dumps({"wall": wall}), flush=True)
        msgs = msgs + [{"role": "assistant", "content": text}, {"role": "tool", "content": f"obs {i}"}]
""")


def null_app():
    """A server that answers every chat call with the same one-word reply, reading the body first."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "tiny",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

    async def chat(request):
        await request.body()
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def drive(url_base: str, mode: str, calls: int, max_tokens: int, direct, clear) -> tuple[list[float], list[float]]:
    """Run one agent process; after each of its calls run `direct(i)` -> seconds. (overheads, direct times).
    `clear()` runs before each call and each direct call: both start from an empty prefix cache."""
    n = calls + 3
    agent = subprocess.Popen([sys.executable, "-c", AGENT, url_base, mode, str(n), str(max_tokens)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    over, dts = [], []
    try:
        for i in range(n):
            clear()
            agent.stdin.write("go\n")
            agent.stdin.flush()
            line = agent.stdout.readline()
            if not line:
                raise SystemExit(f"the agent process ({mode}) exited early with status {agent.wait()}")
            wall = json.loads(line)["wall"]
            dt = direct(i)
            if i >= 3:  # warm-up calls dropped
                over.append(wall - dt)
                dts.append(dt)
    finally:
        agent.stdin.close()
        agent.wait(timeout=30)
    return over, dts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=8)
    args = ap.parse_args()
    import torch

    from posttrain.models.tiny import TinyModelConfig, build_tiny
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.rollout.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.capture import EpisodeRegistry
    from posttrain.serve.protocol import ChatMessage
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
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_tokens)

    def clear() -> None:  # the server is idle here (the agent waits for its turn)
        with eng._lock:
            eng.store.clear()

    def timed(prompt) -> float:
        clear()  # else the direct call would find the proxy call's prompt blocks cached
        t0 = time.perf_counter()
        eng.generate([GenRequest(tuple(prompt), params)])
        return time.perf_counter() - t0

    rows: dict[str, list[float]] = {}
    direct_s: list[float] = []
    with BackgroundServer(build_app(state)) as url:
        for key, mode in (("proxy, http.client", "stdlib"), ("proxy, httpx", "raw"),
                          ("proxy, openai client", "openai")):
            ep = state.episodes.open(task, {}, max_calls=10**6)
            in_server: list[float] = []

            def direct(i: int, ep=ep, in_server=in_server) -> float:
                dt = timed(ep.calls[-1].prompt_ids)
                if i >= 3:
                    in_server.append(ep.calls[-1].wall_s - dt)
                return dt

            rows[key], dts = drive(f"{url}/episodes/{ep.id}/v1", mode, args.calls, args.max_tokens, direct, clear)
            direct_s += dts
            if mode == "stdlib":
                rows["in-server part (http.client episode)"] = in_server
        history: list[dict] = [{"role": "user", "content": "What is 2*3?"}]

        def plain_direct(i: int) -> float:  # the plain route renders the whole history: do the same
            nonlocal history
            dt = timed(state.fmt.prompt_ids([ChatMessage.model_validate(m) for m in history], None))
            history = history + [{"role": "assistant", "content": "x"}, {"role": "tool", "content": f"obs {i}"}]
            return dt

        # the agent's replies differ from "x", but the prompt length (what the direct call costs) is close
        rows["plain route, openai client"], _ = drive(f"{url}/v1", "openai", args.calls, args.max_tokens,
                                                      plain_direct, clear)
    with BackgroundServer(null_app()) as url:  # the clients' own cost, same histories
        for key, mode in (("null server, http.client", "stdlib"), ("null server, httpx", "raw"),
                          ("null server, openai client", "openai")):
            rows[key], _ = drive(f"{url}/v1", mode, args.calls, args.max_tokens, lambda i: 0.0, lambda: None)
    state.close()
    print(f"direct engine.generate: median {statistics.median(direct_s) * 1e3:.2f} ms "
          f"({args.max_tokens} new tokens, prompts growing to the whole history)")
    for key, xs in rows.items():
        xs = sorted(xs)
        print(f"{key:36s} overhead per call: median {statistics.median(xs) * 1e3:.2f} ms, "
              f"p90 {xs[int(0.9 * len(xs))] * 1e3:.2f} ms over {len(xs)} calls")


if __name__ == "__main__":
    main()
