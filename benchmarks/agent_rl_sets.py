"""Agent RL on a multi-step task set: pass rate and steps before and after, and where the episodes fail.

    .venv/bin/python benchmarks/agent_rl_sets.py --model models/smollm2                 # terminal_set, real model
    .venv/bin/python benchmarks/agent_rl_sets.py --model tiny                           # a fresh tiny model (4k context)
    .venv/bin/python benchmarks/agent_rl_sets.py --model models/smollm2 --domain blender_scene --difficulty 0
    .venv/bin/python benchmarks/agent_rl_sets.py --model tiny --rl-steps 1 --n-train 4 --n-eval 2   # smoke
    .venv/bin/python benchmarks/agent_rl_sets.py --model tiny --domain blender_scene --sft-steps 300  # after a warm-up

Everything goes through the CLI a user runs, in this order:

1. `posttrain rl` on `--domain`: `terminal_set` (posttrain/tasks/terminal_set/, 46 tasks in pinned Debian
   images, the bash tool) or `blender_scene` (seeded scenes, Blender's tools; needs `make blender`):
   `--n-train` tasks to train on, `--n-eval` held out (disjoint: the run's tasks/heldout.jsonl), multi-step
   episodes through the one RL loop (its own held-out evals are turned off: step 2 measures instead).
   With `--sft-steps N` it first warms up: N SFT steps on `tasks.sft_frac` of the training tasks, their oracle
   plans acted out with the real tools (the episodes' tools listed the same way, `agent.tools_prompt`).
2. `posttrain eval` of the starting model and of the trained one on the held-out tasks (a suite file over
   the run's heldout.jsonl; greedy, one episode per task), which records every episode with its steps.
   After a warm-up, "before" is the warmed-up model (the run's sft-model) and "start" the model before it.
3. `posttrain compare --json` of before and after: paired pass@1 delta, interval, McNemar.
4. From the recorded episodes: mean steps with a normal-approximation 95% interval, how each episode ended
   (finish reason), and a failure class per failed episode: `no_call` (no tool call attempted: prose only), `malformed_calls`
   (it tried, but no call parsed and validated), `calls_failed` (calls ran, every one failed or exited
   non-zero), `checks_failed` (some calls succeeded, the task's checks still failed).

Extra `key=value` arguments override the RL config (e.g. rl.optim.lr=1e-5). Prints one JSON document and
writes it to --json-out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "posttrain.cli.main"]


def _run(args: list[str], log: Path) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    r = subprocess.run(CLI + args, cwd=ROOT, capture_output=True, text=True)
    log.write_text(r.stdout + "\n--- stderr ---\n" + r.stderr)
    if r.returncode not in (0,):
        raise SystemExit(f"agent_rl_sets: `posttrain {' '.join(args[:1])}` exited {r.returncode} "
                         f"after {time.perf_counter() - t0:.0f} s; its output: {log}")
    return r


def fresh_tiny(out: Path) -> str:
    """A fresh tiny model with a 4k context (terminal prompts are longer than the default 512)."""
    from posttrain.config_schema import TinyModelConfig
    from posttrain.models import save_policy
    from posttrain.models.tiny import build_tiny

    return str(save_policy(*build_tiny(TinyModelConfig(max_position_embeddings=4096), seed=0), out))


def failure_class(rec: dict[str, Any]) -> str:
    turns = (rec.get("trajectory") or {}).get("turns") or []
    said = [t for t in turns if t.get("role") == "assistant"]
    calls = [t for t in said if t.get("tool_call")]
    results = [t["exec_result"] for t in turns if t.get("role") == "tool" and t.get("exec_result")]
    if not calls:
        return "malformed_calls" if any("<tool_call" in (t.get("text") or "") for t in said) else "no_call"
    if all(r.get("status") != "ok" or r.get("exit_code") not in (0, None) for r in results):
        return "calls_failed"
    return "checks_failed"


def episodes(eval_dir: Path) -> dict[str, Any]:
    from posttrain.eval.stats import wilson

    recs = [json.loads(line) for line in (eval_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    judged = [r for r in recs if r["status"] != "infra_error"]
    steps = [r["steps"] for r in judged]
    mean = statistics.fmean(steps) if steps else float("nan")
    half = 1.96 * statistics.stdev(steps) / math.sqrt(len(steps)) if len(steps) > 1 else float("nan")
    failed = [r for r in judged if not r["passed"]]
    k = sum(r["passed"] for r in judged)
    return {"n": len(recs), "infra_errors": len(recs) - len(judged), "passed": k,
            "pass_ci95": list(wilson(k, len(judged))) if judged else None,
            "steps_mean": mean, "steps_ci95": [mean - half, mean + half],
            "steps_solved": [r["steps"] for r in judged if r["passed"]],
            "finish": dict(Counter((r.get("trajectory") or {}).get("finish_reason", "") for r in judged)),
            "failures": dict(Counter(failure_class(r) for r in failed)),
            "reasons": dict(Counter((r.get("reason") or "")[:80] for r in failed).most_common(5))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a model directory, or `tiny` for a fresh tiny model")
    ap.add_argument("--domain", default="terminal_set", choices=["terminal_set", "blender_scene"])
    ap.add_argument("--difficulty", type=float, default=None, help="the domain's difficulty (blender_scene: 0-3)")
    ap.add_argument("--out", default="runs/agent_rl_sets")
    ap.add_argument("--n-train", type=int, default=30)
    ap.add_argument("--n-eval", type=int, default=16)
    ap.add_argument("--rl-steps", type=int, default=8)
    ap.add_argument("--prompts-per-step", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--token-budget", type=int, default=3072,
                    help="a whole episode, prompt included: agent.token_budget in RL, sampling.token_budget in the evals")
    ap.add_argument("--sft-steps", type=int, default=0, help="an SFT warm-up on oracle plans before RL (sft.steps)")
    ap.add_argument("--tools-prompt", default="auto", choices=["auto", "template", "text", "none"],
                    help="how the episodes show their tools: agent.tools_prompt in RL, sampling.tools_prompt in the evals")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", default="")
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()

    name = "tiny" if a.model == "tiny" else Path(a.model).name
    out = ROOT / a.out / f"{a.domain}-{name}-seed{a.seed}"
    out.mkdir(parents=True, exist_ok=True)
    model = fresh_tiny(out / "start-model") if a.model == "tiny" else str(Path(a.model).resolve())
    run = out / "run"
    t0 = time.perf_counter()
    level = "" if a.difficulty is None else f", difficulty: {a.difficulty}"
    domain = f"{{{a.domain}: {{n_train: {a.n_train}, n_eval: {a.n_eval}{level}}}}}"
    _run(["rl", "examples/tiny_rl.yaml", f"tasks.domains={domain}", f"model.path={model}", f"sft.steps={a.sft_steps}",
          f"seed={a.seed}", f"rl.steps={a.rl_steps}", f"rl.prompts_per_step={a.prompts_per_step}",
          f"rl.group_size={a.group_size}", f"agent.token_budget={a.token_budget}", f"agent.tools_prompt={a.tools_prompt}", "rl.checkpoint_every=0",
          "eval.before=false", "eval.after=false", *a.overrides, "--out", str(run)],
         out / "rl.log")
    rl_s = time.perf_counter() - t0

    suite = out / "heldout_suite.yaml"
    suite.write_text(json.dumps({"name": f"{a.domain}_heldout", "epochs": 1,
                                 "sampling": {"temperature": 0.0, "token_budget": a.token_budget,
                                              "tools_prompt": a.tools_prompt},
                                 "tasks": [{"file": str(run / "tasks" / "heldout.jsonl")}]}))
    evals = {}
    models = [("before", model), ("after", str(run))]  # a run directory: its newest checkpoint
    if a.sft_steps:
        models = [("start", model), ("before", str(run / "sft-model")), ("after", str(run))]
    for tag, m in models:
        _run(["eval", "--model", m, "--suite", str(suite), "--out", str(out / f"eval_{tag}"), "--no-cache",
              "--overwrite"], out / f"eval_{tag}.log")
        evals[tag] = episodes(out / f"eval_{tag}")
    cmp = json.loads(_run(["compare", str(out / "eval_before"), str(out / "eval_after"), "--json"],
                          out / "compare.log").stdout)
    doc = {"domain": a.domain, "difficulty": a.difficulty, "model": a.model, "seed": a.seed, "n_train": a.n_train,
           "n_eval": a.n_eval, "sft_steps": a.sft_steps, "tools_prompt": a.tools_prompt, "rl_steps": a.rl_steps, "rl_wall_s": rl_s,
           "overrides": a.overrides,
           "rewards": [json.loads(x).get("reward/mean") for x in (run / "metrics.jsonl").read_text().splitlines()],
           "eval": evals, "compare": cmp}
    text = json.dumps(doc, indent=1, default=str)
    print(text)
    if a.json_out:
        Path(a.json_out).write_text(text + "\n")


if __name__ == "__main__":
    main()
