"""Agent loop benchmark: RL on the `tools` domain (headline), and terminal-domain speed.

    .venv/bin/python benchmarks/agent_bench.py headline [--seed S] [key=value ...]
    nice -n 10 .venv/bin/python benchmarks/agent_bench.py speed [--episodes 32 --repeats 3]

headline: runs the agent recipe, `posttrain quickstart --agent` (posttrain/recipes/agent.py,
preset posttrain/recipes/presets/agent.yaml; its docstring says what each phase does), with
config overrides over the preset, and prints its before/after table and paired tests.

speed: `terminal` tasks, 32 episodes at once, each with its own sandbox session, driven
(a) by an oracle policy that replays each task's plan (no model cost: the loop, tools
and sandbox) and (b) by the tiny model through the `fast` engine (real generation,
mostly malformed calls). Reports steps/s and the share of summed episode time spent
generating, in in-process tools, in the sandbox (session start, shell steps) and in
verification; shares can sum to more than the wall time's worth because episodes overlap.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def headline(args: argparse.Namespace) -> None:
    """The recipe itself (recipes/agent.py, preset presets/agent.yaml), run and printed."""
    from posttrain.recipes.agent import agent_config, format_agent_summary, run_agent_quickstart

    cfg = agent_config(None, [f"seed={args.seed}", f"threads={args.threads}", *args.overrides])
    summary = run_agent_quickstart(cfg, Path(args.out), log=lambda line: print(line, flush=True))
    print()
    print("\n".join(format_agent_summary(summary)))


class OracleEngine:
    """Replays each task's oracle plan (tasks of one kind share a prompt, so the agent's request
    id, `step:task_id:sample:turn`, names the task)."""

    def __init__(self, tok: Any, tasks: Sequence[Any]) -> None:
        from posttrain.rollout.agent.toolcall import format_tool_call
        from posttrain.tasks.plan import parse_plan

        self.tok, self.weights_version, self.max_len = tok, 0, 1 << 20
        self.plans = {t.id: [format_tool_call("bash", {"command": s["arguments"]["cmd"]}) if "tool" in s
                             else format_tool_call("submit", {}) for s in parse_plan(t.oracle)] for t in tasks}

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        from posttrain.rollout.engine import Completion

        out = []
        for r in requests:
            text = self.tok.decode(list(r.prompt_ids), skip_special_tokens=False)
            plan = self.plans[r.id.split(":")[1]]
            reply = plan[min(text.count("<|tool|>"), len(plan) - 1)]
            ids = tuple(self.tok(reply, add_special_tokens=False)["input_ids"]) + (self.tok.eos_token_id,)
            out.append(Completion(r.id, 0, ids, (0.0,) * len(ids), reply, "stop"))
        return out


async def speed_once(engine: Any, tok: Any, tasks: Sequence[Any]) -> dict[str, float]:
    from posttrain.rollout.agent.loop import AgentOptions, rollout_agent
    from posttrain.sandbox import SandboxPool

    pool = SandboxPool()
    t0 = time.perf_counter()
    try:
        trajs = await rollout_agent(engine, tok, tasks, AgentOptions(n=1, temperature=1.0, seed=0, max_steps=4,
                                                                     max_new_tokens=48, concurrency=len(tasks)),
                                    sandbox=pool)
    finally:
        await pool.close()
    wall = time.perf_counter() - t0
    tot = sum(t.timings.get("total_s", 0.0) for t in trajs)
    share = {k: sum(t.timings.get(k, 0.0) for t in trajs) / tot for k in ("generate_s", "tool_s", "sandbox_s", "verify_s")}
    steps = sum(t.num_steps for t in trajs)
    return {"steps_per_s": steps / wall, "wall_s": wall, "steps": steps, "passed": sum(t.verify.passed for t in trajs
            if t.verify), "infra": sum(t.infra_error for t in trajs), **share}


def speed(args: argparse.Namespace) -> None:
    import torch

    from posttrain.config import TinyModelConfig
    from posttrain.models.tiny import build_tiny
    from posttrain.registry import build
    from posttrain.rollout import make_engine

    torch.set_num_threads(args.threads)
    tasks = build("terminal", kind="domain").generate(args.episodes, seed=0, difficulty=0.0)
    model, tok = build_tiny(TinyModelConfig(max_position_embeddings=1024), seed=0)
    engines = {"oracle policy (no model)": OracleEngine(tok, tasks), "tiny model, fast engine": make_engine("fast", model, tok)}
    print(f"terminal domain, {args.episodes} concurrent episodes (one sandbox session each), medians of {args.repeats}")
    print("| policy | steps/s | wall s | generation (incl. queue) | tools | sandbox | verify | passed | infra errors "
          "| prompt tokens served from KV cache |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, eng in engines.items():
        runs = [asyncio.run(speed_once(eng, tok, tasks)) for _ in range(args.repeats)]
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        hit = eng.stats()["prefix_cache_hit_rate"] if hasattr(eng, "stats") else float("nan")
        print(f"| {name} | {m['steps_per_s']:.1f} | {m['wall_s']:.2f} | {m['generate_s']:.0%} | {m['tool_s']:.0%} | "
              f"{m['sandbox_s']:.0%} | {m['verify_s']:.0%} | {m['passed']:.0f}/{args.episodes} | {m['infra']:.0f} "
              f"| {hit:.0%} |")


def main() -> None:
    from posttrain.builtins import load_builtins

    load_builtins()  # as the CLI does first: load_config checks every registry name it reads
    p = argparse.ArgumentParser()
    p.add_argument("part", choices=["headline", "speed"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/agent_bench")
    p.add_argument("overrides", nargs="*", help="headline: config overrides over presets/agent.yaml, "
                   "e.g. recipe.agent.rl_minutes=10 rl.lr=2e-4")
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    headline(args) if args.part == "headline" else speed(args)


if __name__ == "__main__":
    main()
