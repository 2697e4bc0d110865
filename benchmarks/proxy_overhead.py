"""Per-call overhead of the token-capturing proxy over a direct `engine.generate` call.

    .venv/bin/python benchmarks/proxy_overhead.py [--calls 60] [--max-tokens 8]

One process, tiny default model, `fast` engine, greedy, `--max-tokens` new tokens. An
episode is opened on the proxy (serve/capture.py behind a real uvicorn server on a
loopback port) and driven by the official `openai` client the way an agent drives it:
each call sends the whole history so far plus one new tool message, so every call takes
the proxy's continuation path (exact previous ids + the new message's ids). Right after
each proxy call, the same prompt ids (as the proxy recorded them) and parameters go to
`engine.generate` directly, on the same engine. Overhead = proxy call wall time (client
side: HTTP, JSON, validation, prompt construction, engine-loop hand-off, response) minus
the direct call's; reported as the median (and p90) over the calls. Also reported: the
same for the plain `/v1/chat/completions` route, without capture, and the proxy's
in-server part (route entry to the last token recorded, minus the direct call): the
hand-off to the engine-loop thread and back, without HTTP or the client.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--max-tokens", type=int, default=8)
    args = ap.parse_args()
    import openai
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
    with BackgroundServer(build_app(state)) as url:
        ep = state.episodes.open(task, {}, max_calls=10**6)
        proxied = openai.OpenAI(base_url=f"{url}/episodes/{ep.id}/v1", api_key="x", max_retries=0)
        plain = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        rows = {"proxy": [], "plain": [], "in-server": []}
        for client, key in ((proxied, "proxy"), (plain, "plain")):
            msgs = [{"role": "user", "content": "What is 2*3?"}]
            for i in range(args.calls + 3):
                t0 = time.perf_counter()
                r = client.chat.completions.create(model="tiny", messages=msgs, temperature=0,
                                                   max_tokens=args.max_tokens)
                t_http = time.perf_counter() - t0
                prompt = ep.calls[-1].prompt_ids if key == "proxy" else state.fmt.prompt_ids(
                    [ChatMessage.model_validate(m) for m in msgs], None)
                t0 = time.perf_counter()
                eng.generate([GenRequest(tuple(prompt), params)])
                t_direct = time.perf_counter() - t0
                if i >= 3:  # warm-up calls dropped
                    rows[key].append(t_http - t_direct)
                    if key == "proxy":  # handler entry to last token recorded: without HTTP and the client
                        rows["in-server"].append(ep.calls[-1].wall_s - t_direct)
                msgs = msgs + [{"role": "assistant", "content": r.choices[0].message.content},
                               {"role": "tool", "content": f"obs {i}"}]
    state.close()
    for key in ("proxy", "plain", "in-server"):
        xs = sorted(rows[key])
        print(f"{key:9s} overhead per call: median {statistics.median(xs) * 1e3:.2f} ms, "
              f"p90 {xs[int(0.9 * len(xs))] * 1e3:.2f} ms over {len(xs)} calls (max_tokens {args.max_tokens})")


if __name__ == "__main__":
    main()
