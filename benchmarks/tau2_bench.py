"""τ²-bench in posttrain: gold replays, and a small model as the agent with a second model as the customer.

    python benchmarks/tau2_bench.py gold                                   # every task of airline, retail, mock
    python benchmarks/tau2_bench.py agent --agent models/smollm2 --user models/smollm2 --domain mock
    python benchmarks/tau2_bench.py agent --agent models/smollm2 --user models/smollm2 --domain airline --n 20
    python benchmarks/tau2_bench.py smoke                                  # mock gold + one tiny-model episode

`gold`: each task's gold actions replayed through the `tau2` verifier (a fresh database, tau2's
hash against the gold hash, communicate_info said) must score 1.0; also the score of an agent
that does nothing (silent, or one greeting), under τ²'s official reward (1.0 where the right
behaviour is to change nothing and say nothing required) and under the guarded reward that
training uses (0 on every task of the guarded pool; tasks/tau2_guard.py). Workers in parallel
processes (`--workers`).

`agent`: pass^1 (the mean reward of one episode per task) with a Wilson 95% interval, finish
reasons, which reward part failed, and per-step timing: the agent's generation, the simulated
user (the second model), tools and verification, each as a share of episode time. The second
model's throughput inside the run (conversations per second of `active_s`, the wall time with at
least one of its calls running) is set against the same opening conversations sent to it alone,
in one batch, after the run; `share_of_wall` is its `active_s` over the run's wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posttrain.eval.stats import wilson  # noqa: E402
from posttrain.registry import build  # noqa: E402
from posttrain.types import Trajectory, Turn  # noqa: E402
from posttrain.verifiers.base import VerifyContext  # noqa: E402

DOMAINS = ("mock", "airline", "retail")


def _gold_one(dom: str, task_id: str) -> dict:
    """One task in a worker process: the gold replay's and a do-nothing agent's scores under τ²'s official
    reward, and under the guarded reward (the training default) where the task is in the guarded pool."""
    from posttrain.tasks.tau2 import gold_trajectory

    def scores(reward: str) -> dict:
        task = build(f"tau2_{dom}", kind="domain", reward=reward).task(task_id)
        v = build(task.verifier, kind="verifier")
        silent = Trajectory(task.id, task.version, task.domain, (), ())
        hello = Trajectory(task.id, task.version, task.domain, (), (Turn("assistant", "Hello, how can I help?"),))
        return {k: asyncio.run(v(task, x, VerifyContext())).score
                for k, x in (("gold", gold_trajectory(task)), ("silent", silent), ("hello", hello))}

    guarded = build(f"tau2_{dom}", kind="domain").guardable(task_id)
    return {"id": task_id, "official": scores("official"), "guarded": scores("guarded") if guarded else None}


def gold(domains, workers: int, limit: int = 0, skip: int = 0) -> dict:
    from posttrain.tasks.tau2_env import tau2_tasks

    out = {}
    for dom in domains:
        t0 = time.perf_counter()
        ids = list(tau2_tasks(dom))[skip:][: limit or None]
        with ProcessPoolExecutor(workers) as ex:
            rows = list(ex.map(_gold_one, [dom] * len(ids), ids))
        pool = [r for r in rows if r["guarded"] is not None]
        out[dom] = {"tasks": len(rows),
                    "official": {"gold_1.0": sum(r["official"]["gold"] == 1.0 for r in rows),
                                 "gold_below_1": [r["id"] for r in rows if r["official"]["gold"] != 1.0],
                                 "do_nothing_1.0": [r["id"] for r in rows if max(r["official"]["silent"], r["official"]["hello"]) == 1.0]},
                    "guarded": {"pool": len(pool), "left_out": [r["id"] for r in rows if r["guarded"] is None],
                                "gold_1.0": sum(r["guarded"]["gold"] == 1.0 for r in pool),
                                "gold_below_1": [r["id"] for r in pool if r["guarded"]["gold"] != 1.0],
                                "do_nothing_above_0": [r["id"] for r in pool if max(r["guarded"]["silent"], r["guarded"]["hello"]) > 0]},
                    "wall_s": time.perf_counter() - t0}
    return out


async def _alone(svc, convs) -> float:
    """Seconds per conversation when the second model answers `convs` alone, in one batch."""
    t0 = time.perf_counter()
    await svc.chat(convs)
    return (time.perf_counter() - t0) / max(1, len(convs))


def agent(a: argparse.Namespace) -> dict:
    from posttrain.config_schema import SecondModelConfig
    from posttrain.models.service import open_service
    from posttrain.rollout import make_engine
    from posttrain.rollout.agent.tau2_loop import _USER_SYSTEM, Tau2Options, Tau2Runner
    from posttrain.rollout.service_local import load_second_model

    model, tok = load_second_model(a.agent)
    user = open_service("user", SecondModelConfig(path=a.user, max_new_tokens=a.user_tokens, temperature=0.0,
                                                  batch=a.concurrency, timeout_s=600))
    tasks = build(f"tau2_{a.domain}", kind="domain", split=None, reward=a.reward).generate(a.n, seed=0)
    opts = Tau2Options(max_steps=a.max_steps, max_new_tokens=a.max_new_tokens, concurrency=a.concurrency, seed=0,
                       temperature=a.temperature)
    t0 = time.perf_counter()
    trajs = asyncio.run(Tau2Runner(make_engine(a.engine, model, tok), tok, user, opts).run(tasks))
    wall = time.perf_counter() - t0
    ok = [t for t in trajs if not t.infra_error]
    passed = sum(t.reward == 1.0 for t in ok)
    tm = collections.Counter()
    for t in ok:
        tm.update({k: v for k, v in t.timings.items() if isinstance(v, float)})
    steps = sum(t.timings.get("steps", 0) for t in ok) or 1
    total = tm["total_s"] or 1.0
    parts = collections.Counter(p for t in ok for p, v in t.verify.details.get("parts", {}).items() if v < 1.0)
    convs = [[{"role": "system", "content": _USER_SYSTEM.format(scenario=t.metadata["user_scenario"])},
              {"role": "user", "content": "Hi! How can I help you today?"}] for t in tasks]
    latency_in_run = user.stats.busy_s / max(1, user.stats.calls)  # a call's wait, queueing behind the agent included
    in_run = user.stats.items / max(1e-9, user.stats.active_s)  # conversations a second while it was working
    per_conv_alone = asyncio.run(_alone(user, convs))
    return {"domain": a.domain, "agent": a.agent, "user": a.user, "episodes": len(trajs), "infra_errors": len(trajs) - len(ok),
            "pass^1": passed / max(1, len(ok)), "pass^1_ci95": wilson(passed, len(ok)) if ok else None,
            "finish": dict(collections.Counter(t.finish_reason for t in trajs)), "failed_parts": dict(parts),
            "per_step_s": {k: tm[k] / steps for k in ("generate_s", "user_s", "tool_s", "verify_s")},
            "share_of_episode_time": {k: tm[k] / total for k in ("generate_s", "user_s", "tool_s", "verify_s")},
            "user_model": {"active_s": user.stats.active_s, "share_of_wall": user.stats.active_s / wall,
                           "conversations": user.stats.items, "calls": user.stats.calls,
                           "latency_per_call_s": latency_in_run,
                           "throughput_conv_per_s": {"in_run": in_run, "alone_batched": 1 / per_conv_alone}},
            "tool_calls_per_episode": sum(t.tool_call is not None for x in ok for t in x.turns) / max(1, len(ok)),
            "parse_errors": sum(t.exec_result is not None and t.exec_result.error.startswith("parse:")
                                for x in ok for t in x.turns),
            "reward_per_task": {t.task_id: t.reward for t in ok},
            "first_episode": [[t.role, t.text[:160]] for t in trajs[0].turns] if trajs else [],
            "wall_s": wall}


def smoke() -> dict:
    import tempfile

    from posttrain.config_schema import TinyModelConfig
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    d = str(save_policy(*build_tiny(TinyModelConfig(max_position_embeddings=4096), seed=0),
                        Path(tempfile.mkdtemp()) / "tiny4k"))
    a = argparse.Namespace(agent=d, user=d, domain="mock", n=2, max_steps=3, max_new_tokens=12, user_tokens=8,
                           concurrency=2, engine="hf", temperature=1.0, reward="official")
    return {"gold": gold(["mock"], 2), "agent": agent(a)}


if __name__ == "__main__":
    from posttrain.builtins import load_builtins

    load_builtins()  # the model backends, domains and verifiers are registered there (the CLI calls it first)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["gold", "agent", "smoke"])
    ap.add_argument("--domains", default=",".join(DOMAINS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reward", choices=["official", "guarded"], default="official",
                    help="agent: τ²'s own reward (pass^1 comparable with published figures) or the guarded training reward")
    ap.add_argument("--limit", type=int, default=0, help="gold: the first N tasks of each domain (0: all)")
    ap.add_argument("--skip", type=int, default=0, help="gold: start after the first N tasks of each domain")
    ap.add_argument("--agent", default="models/smollm2")
    ap.add_argument("--user", default="models/smollm2")
    ap.add_argument("--domain", default="mock")
    ap.add_argument("--n", type=int, default=1000, help="tasks (all of the domain when more)")
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--user-tokens", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--engine", default="fast")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = gold(a.domains.split(","), a.workers, a.limit, a.skip) if a.mode == "gold" else agent(a) if a.mode == "agent" else smoke()
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
