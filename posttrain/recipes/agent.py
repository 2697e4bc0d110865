"""`posttrain quickstart --agent`: RL teaches the tiny model to use the calculator (`tools` domain).

    cfg = agent_config(None, ["seed=1"])              # presets/agent.yaml <- YAML <- overrides
    summary = run_agent_quickstart(cfg, Path("runs/agent"), log=print)
    print("\\n".join(format_agent_summary(summary)))

1. the tiny default model (context 512) and the calculator-product tasks, with the lookup
   table that lets an agent re-read the question (rollout/agent/tasks.py); held-out tasks are
   a disjoint seed and never share a question with the training pool
2. SFT on oracle action plans until it copies operands and results reliably, then SFT on a
   base model's habits (recipes/agent_warmup.py), both stopped on measured levels
3. greedy held-out eval through the agent loop ("before"), plus sampled episodes for steps
4. the real RL step (train/rl.py dispatches multi-step tasks to the agent rollout) for
   agent.recipe.rl_minutes of wall clock (rl.steps caps the steps)
5. eval again; paired exact McNemar on completion; steps on solved episodes, paired by task

The run directory gets the usual RL files plus agent_summary.json. The recipe is not
resumable: an interrupt keeps the RL checkpoints but a rerun starts over.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from posttrain.config import RunConfig, dump_config, load_config
from posttrain.recipes.agent_warmup import habit_trend, habits_until, sft_until
from posttrain.recipes.presets import load_preset

Log = Callable[[str], None]


def agent_config(path: str | Path | None, overrides: Sequence[str]) -> RunConfig:
    return load_config(path, overrides, base=load_preset("agent"))


def warm_up(model: Any, tok: Any, train: list[Any], cfg: RunConfig, log: Log) -> list[float]:
    """The recipe's warm-up of `model` in place (copy skill, then habits; step 2 above); the SFT losses."""
    from posttrain.rollout.agent.sft import plan_demonstrations
    from posttrain.rollout.agent.tasks import habit_tasks, reread_tasks
    from posttrain.train.agent_sft import sft_on_demonstrations

    r = cfg.agent.recipe
    val = train[:r.val_tasks]
    demos = asyncio.run(plan_demonstrations(tok, reread_tasks(train, r.reread, cfg.seed)))
    if r.stop_at is None:
        losses = sft_on_demonstrations(model, tok, demos, steps=cfg.sft.steps, lr=cfg.sft.lr, batch_size=32,
                                       seed=cfg.seed)
    else:
        losses = sft_until(model, tok, demos, val, cfg, log)
    if r.habits:  # the same tasks acted out as a base model would (agent_tasks.habit_tasks)
        gs, gl, rc = r.habits
        mixed = asyncio.run(plan_demonstrations(tok, reread_tasks(habit_tasks(train, gs, gl, rc, cfg.seed),
                                                                   r.reread, cfg.seed + 1)))
        losses += habits_until(model, tok, mixed, val, cfg, log)
    return losses


def run_agent_quickstart(cfg: RunConfig, run_dir: Path, log: Log = print) -> dict[str, Any]:
    import torch

    from posttrain.eval.agent_eval import agent_eval, sampled_steps, steps_change
    from posttrain.eval.stats import mcnemar_exact
    from posttrain.models.tiny import build_tiny
    from posttrain.rollout.agent.tasks import product_tasks
    from posttrain.tasks.splits import Splits, pin_splits
    from posttrain.train.rl import build_state, train_rl

    r = cfg.agent.recipe
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    run_dir.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, run_dir / "config.yaml")
    t0 = time.perf_counter()
    model, tok = build_tiny(cfg.model.tiny, seed=cfg.seed)
    train = product_tasks(r.n_train, cfg.seed, task_table=True)
    held = product_tasks(r.n_eval, 10_000 + cfg.seed, exclude={t.prompt[-1].content for t in train}, task_table=True)
    pin_splits(Splits(train, held), run_dir)  # replay, postmortem and eval read these exact tasks back
    sft_losses = warm_up(model, tok, train, cfg, log)
    t_sft = time.perf_counter() - t0
    st = build_state(cfg, run_dir, model, tok, train, held, sandbox=None)
    temp = cfg.rl.temperature
    before = asyncio.run(agent_eval(st.engine, tok, held))
    steps_before = asyncio.run(sampled_steps(st.engine, tok, held, r.step_samples, temp, cfg.seed))
    log(f"before RL: held-out completion {before['rate']:.3f}, calculator called in {before['tool_rate']:.3f}, "
        f"completion when called {before['pass_given_tool']:.3f}, avg steps on solved {before['steps_solved']:.2f}, "
        f"re-read first {before['reread']:.3f} ({time.perf_counter() - t0:.0f}s)")
    t_rl0 = time.perf_counter()
    rows: list[dict] = []

    def on_step(step: int, row: dict) -> None:
        rows.append(row)
        log(f"rl step {step}: reward {row['reward/mean']:.3f} step_s {row['time/step_s']:.1f}")

    asyncio.run(train_rl(st, on_step=on_step, budget_s=r.rl_minutes * 60))
    t_rl = time.perf_counter() - t_rl0
    after = asyncio.run(agent_eval(st.engine, tok, held))
    steps_after = asyncio.run(sampled_steps(st.engine, tok, held, r.step_samples, temp, cfg.seed))
    common = [k for k in before["passed"] if k in after["passed"]]
    b = sum(before["passed"][k] and not after["passed"][k] for k in common)
    c = sum(after["passed"][k] and not before["passed"][k] for k in common)
    summary = {
        "n_tasks": len(common), "before": sum(before["passed"][k] for k in common) / max(1, len(common)),
        "after": sum(after["passed"][k] for k in common) / max(1, len(common)), "b": b, "c": c,
        "p_value": mcnemar_exact(b, c), "sft_steps": len(sft_losses), "sft_final_loss": sft_losses[-1],
        "steps_before": before["steps_solved"], "steps_after": after["steps_solved"],
        "sampled_steps": steps_change(steps_before, steps_after),
        "sampled_steps_per_task": {"before": steps_before, "after": steps_after},
        "tool_rate": [before["tool_rate"], after["tool_rate"]], "reread": [before["reread"], after["reread"]],
        "malformed": [before["malformed"], after["malformed"]],
        "pass_given_tool": [before["pass_given_tool"], after["pass_given_tool"]],
        "habit_trend": habit_trend(st.store, 20, 20), "rl_steps": st.step, "prompts": cfg.rl.prompts_per_step,
        "group": cfg.rl.group_size, "temperature": temp, "step_samples": r.step_samples,
        "wall_sft": t_sft, "wall_rl": t_rl, "wall_total": time.perf_counter() - t0, "cpu_s": time.process_time(),
        "threads": cfg.threads or torch.get_num_threads(), "after_example": after["example"], "rows": rows}
    (run_dir / "agent_summary.json").write_text(json.dumps(summary, default=str))
    from posttrain.eval.run_report import write_run_report

    write_run_report(run_dir, title="posttrain quickstart --agent")  # report.html, self-contained
    return summary


def format_agent_summary(s: dict[str, Any]) -> list[str]:
    """The before/after table and the paired tests, as markdown lines."""
    pb, pa, st = s["before"], s["after"], s["sampled_steps"]
    if not st["resamples"]:  # no task solved both times: nothing to pair
        boot_p = "n/a"
    else:
        boot_p = f"= {st['p']:.2g}" if st["p"] > 0 else f"< {2 / st['resamples']:.0e}"  # none on the other side
    lines = [f"held-out tasks: {s['n_tasks']}; SFT {s['sft_steps']} steps (final loss {s['sft_final_loss']:.3f}); "
             f"RL {s['rl_steps']} steps ({s['prompts']}x{s['group']} episodes each)",
             "| metric | before RL | after RL | after/before |", "| --- | --- | --- | --- |",
             f"| completion (pass) | {pb:.3f} | {pa:.3f} | {f'{pa / pb:.2f}' if pb else 'n/a'} |",
             f"| avg steps, solved tasks | {s['steps_before']:.2f} | {s['steps_after']:.2f} | "
             f"{s['steps_after'] / s['steps_before']:.2f} |",
             f"| avg steps, solved sampled episodes (T={s['temperature']}, {s['step_samples']}/task; "
             f"{st['tasks']} tasks solved both times) | {st['before']:.3f} | {st['after']:.3f} | "
             f"{st['after'] / st['before']:.3f} |",
             f"| solved sampled episodes taking more than 2 steps | {st['over_min'][0]:.3f} | {st['over_min'][1]:.3f} | |",
             f"| greedy episodes re-reading the question first | {s['reread'][0]:.3f} | {s['reread'][1]:.3f} | |",
             f"| malformed calls | {s['malformed'][0]} | {s['malformed'][1]} | |",
             f"| episodes calling the calculator | {s['tool_rate'][0]:.3f} | {s['tool_rate'][1]:.3f} | |",
             f"| completion when it is called | {s['pass_given_tool'][0]:.3f} | {s['pass_given_tool'][1]:.3f} | |",
             "",
             f"completion {100 * (pa - pb):+.1f} points; McNemar exact p = {s['p_value']:.2g} "
             f"(fail->pass {s['c']}, pass->fail {s['b']})",
             f"steps on solved sampled episodes: {st['delta']:+.3f} per task (95% CI {st['low']:+.3f} to "
             f"{st['high']:+.3f}), task-cluster bootstrap p {boot_p}; fewer steps on {st['fell']} tasks, more on "
             f"{st['rose']}, exact sign test p = {st['sign_p']:.2g}",
             f"wall: SFT {s['wall_sft']:.0f}s, RL {s['wall_rl']:.0f}s, total incl. evals {s['wall_total']:.0f}s; "
             f"process CPU time {s['cpu_s']:.0f}s (= {s['cpu_s'] / s['threads']:.0f}s on {s['threads']} dedicated cores)",
             f"after example: {s['after_example']}"]
    for name, r in s["habit_trend"].items():
        lines.append(f"sampled training episodes, RL steps {r['steps']}: pass {r['pass']:.3f}, re-read {r['reread']:.3f}, "
                     f"re-checked {r['recheck']:.3f}, estimated without the tool {r['estimate']:.3f} "
                     f"({r['episodes']} episodes)")
    return lines
