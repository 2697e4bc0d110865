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
   recipe.agent.rl_minutes of wall clock (rl.steps caps the steps)
5. eval again; paired exact McNemar on completion; steps on solved episodes, paired by task

The run directory gets the usual RL files plus agent_summary.json. The recipe is not
resumable: an interrupt keeps the RL checkpoints but a rerun starts over.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import Field

from posttrain.config import RunConfig, Section, load_config
from posttrain.config_recipe import recipe_settings
from posttrain.recipes.agent_warmup import habit_trend, habits_until, sft_until
from posttrain.recipes.pipeline import RunContext, recipe
from posttrain.recipes.presets import load_preset

Log = Callable[[str], None]


class AgentRecipeSettings(Section):
    """`recipe.agent:` (was agent.recipe): the calculator-product tasks of the `tools` domain, an SFT
    warm-up on oracle plans that stops on a measured level, then SFT on a base model's habits, then RL
    for a wall-clock budget. SFT steps and lr come from `sft`."""

    n_train: int = Field(default=2000, ge=1)
    n_eval: int = Field(default=200, ge=1)
    val_tasks: int = Field(default=50, ge=1)  # validation tasks, from the training pool (never held-out)
    stop_at: float | None = Field(default=0.9, gt=0.0, le=1.0)  # stop the warm-up at this validation completion
    check_every: int = Field(default=25, ge=1)
    restart_after: int = Field(default=500, ge=1)  # re-initialise if no validation task is solved by this step
    restarts: int = Field(default=2, ge=0)
    reread: float = Field(default=0.5, ge=0.0, le=1.0)  # share of warm-up plans that re-read the question first
    habits: list[float] | None = Field(default=[0.9, 0.3, 0.3], min_length=3, max_length=3)  # GUESS_SMALL, GUESS_LARGE, RECHECK (agent_tasks.habit_tasks)
    habit_steps: int = Field(default=300, ge=0)
    habit_lr: float = Field(default=1e-3, gt=0.0)
    habit_min_copy: float = Field(default=0.8, ge=0.0, le=1.0)  # and completion when it calls >= this
    habit_stop_band: list[float] = Field(default=[0.3, 0.7], min_length=2, max_length=2)  # stop the habit SFT when the tool-call share is in [lo, hi]
    rl_minutes: float = Field(default=5.0, gt=0.0)  # RL wall-clock budget (rl.steps caps the steps)
    step_samples: int = Field(default=4, ge=1)  # sampled episodes per held-out task for the steps comparison


def agent_config(path: str | Path | None, overrides: Sequence[str]) -> RunConfig:
    return load_config(path, overrides, base=load_preset("agent"))


async def warm_up(model: Any, tok: Any, train: list[Any], cfg: RunConfig, log: Log) -> list[float]:
    """The recipe's warm-up of `model` in place (copy skill, then habits; step 2 above); the SFT losses."""
    from posttrain.rollout.agent.sft import plan_demonstrations
    from posttrain.rollout.agent.tasks import habit_tasks, reread_tasks
    from posttrain.train.agent_sft import sft_on_demonstrations

    r = recipe_settings(cfg, "agent")
    val = train[:r.val_tasks]
    shown = {"tools_prompt": cfg.agent.tools_prompt, "context": model.config.max_position_embeddings}  # as the episodes
    demos = await plan_demonstrations(tok, reread_tasks(train, r.reread, cfg.seed), **shown)
    if r.stop_at is None:
        losses = sft_on_demonstrations(model, tok, demos, steps=cfg.sft.steps, optim=cfg.sft.optim, batch_size=32,
                                       seed=cfg.seed)
    else:
        losses = await sft_until(model, tok, demos, val, cfg, log)
    if r.habits:  # the same tasks acted out as a base model would (agent_tasks.habit_tasks)
        gs, gl, rc = r.habits
        mixed = await plan_demonstrations(tok, reread_tasks(habit_tasks(train, gs, gl, rc, cfg.seed), r.reread,
                                                            cfg.seed + 1), **shown)
        losses += await habits_until(model, tok, mixed, val, cfg, log)
    return losses


def run_agent_quickstart(cfg: RunConfig, run_dir: Path, log: Log = print) -> dict[str, Any]:
    """The `agent` recipe through the one pipeline (recipes/pipeline.py); `log` gets its lines."""
    from posttrain.recipes.pipeline import run_recipe

    def report(phase: str, info: dict) -> None:
        line = _line(phase, info)
        if line:
            log(line)

    return run_recipe("agent", cfg, run_dir, report=report)


def _line(phase: str, info: dict) -> str:
    """A report event as the plain log line `run_agent_quickstart(log=...)` prints ("" for none)."""
    if phase == "log":
        return info["line"]
    if phase == "rl":
        return f"rl step {info['step'] - 1}: reward {info['reward/mean']:.3f} step_s {info['time/step_s']:.1f}"
    return ""


@recipe("agent", settings=AgentRecipeSettings)
class AgentRL:
    """The calculator agent (`posttrain quickstart --agent`): steps 1-5 of the module docstring."""

    title = "posttrain quickstart --agent"
    summary_file = "agent_summary.json"
    sandboxed = False  # the calculator runs in process; external agents start their own processes
    resumable = False

    def splits(self, cfg: RunConfig) -> Any:
        from posttrain.rollout.agent.tasks import product_tasks
        from posttrain.tasks.splits import Splits

        r = recipe_settings(cfg, "agent")
        n_train, n_eval = r.n_train, r.n_eval
        train = product_tasks(n_train, cfg.seed, task_table=True)
        held = product_tasks(n_eval, 10_000 + cfg.seed, exclude={t.prompt[-1].content for t in train}, task_table=True)
        return Splits(train, held)

    async def base(self, ctx: RunContext) -> tuple[Any, Any]:
        from posttrain.models.tiny import build_tiny

        ctx.extra["t0"] = time.perf_counter()
        return build_tiny(ctx.cfg.model.tiny, seed=ctx.cfg.seed)

    async def warm_up(self, ctx: RunContext) -> tuple[Any, Any]:
        log = lambda line: ctx.report("log", {"line": line})  # noqa: E731
        ctx.extra["sft_losses"] = await warm_up(ctx.model, ctx.tok, ctx.splits.train, ctx.cfg, log)
        ctx.extra["wall_sft"] = time.perf_counter() - ctx.extra["t0"]
        return ctx.model, ctx.tok

    async def evaluate(self, ctx: RunContext, when: str) -> dict[str, Any]:
        from posttrain.eval.agent_eval import agent_eval, sampled_steps

        st, held, r, t0 = ctx.rl_state(), ctx.splits.held_out, recipe_settings(ctx.cfg, "agent"), ctx.extra["t0"]
        res = await agent_eval(st.engine, ctx.tok, held)
        res["sampled"] = await sampled_steps(st.engine, ctx.tok, held, r.step_samples, ctx.cfg.rl.temperature,
                                             ctx.cfg.seed)
        if when == "before":
            ctx.report("log", {"line": f"before RL: held-out completion {res['rate']:.3f}, calculator called in "
                               f"{res['tool_rate']:.3f}, completion when called {res['pass_given_tool']:.3f}, avg "
                               f"steps on solved {res['steps_solved']:.2f}, re-read first {res['reread']:.3f} "
                               f"({time.perf_counter() - t0:.0f}s)"})
        return res

    async def train(self, ctx: RunContext) -> None:
        from posttrain.train.rl import train_rl

        rows: list[dict] = ctx.extra.setdefault("rows", [])
        t_rl0, total = time.perf_counter(), ctx.cfg.rl.steps

        def on_step(step: int, row: dict) -> None:
            rows.append(row)
            ctx.report("rl", {"step": step + 1, "total": total, **row})

        await train_rl(ctx.rl_state(), on_step=on_step, budget_s=recipe_settings(ctx.cfg, "agent").rl_minutes * 60)
        ctx.extra["wall_rl"] = time.perf_counter() - t_rl0

    def summarize(self, ctx: RunContext, before: dict, after: dict) -> dict:
        import torch

        from posttrain.eval.agent_eval import steps_change
        from posttrain.eval.stats import mcnemar_exact

        cfg, st, x = ctx.cfg, ctx.state, ctx.extra
        common = [k for k in before["passed"] if k in after["passed"]]
        b = sum(before["passed"][k] and not after["passed"][k] for k in common)
        c = sum(after["passed"][k] and not before["passed"][k] for k in common)
        losses = x["sft_losses"]
        return {
            "n_tasks": len(common), "before": sum(before["passed"][k] for k in common) / max(1, len(common)),
            "after": sum(after["passed"][k] for k in common) / max(1, len(common)), "b": b, "c": c,
            "p_value": mcnemar_exact(b, c), "sft_steps": len(losses), "sft_final_loss": losses[-1],
            "steps_before": before["steps_solved"], "steps_after": after["steps_solved"],
            "sampled_steps": steps_change(before["sampled"], after["sampled"]),
            "sampled_steps_per_task": {"before": before["sampled"], "after": after["sampled"]},
            "tool_rate": [before["tool_rate"], after["tool_rate"]], "reread": [before["reread"], after["reread"]],
            "malformed": [before["malformed"], after["malformed"]],
            "pass_given_tool": [before["pass_given_tool"], after["pass_given_tool"]],
            "habit_trend": habit_trend(st.store, 20, 20), "rl_steps": st.step, "prompts": cfg.rl.prompts_per_step,
            "group": cfg.rl.group_size, "temperature": cfg.rl.temperature, "step_samples": recipe_settings(cfg, "agent").step_samples,
            "wall_sft": x["wall_sft"], "wall_rl": x["wall_rl"], "wall_total": time.perf_counter() - x["t0"],
            "cpu_s": time.process_time(), "threads": cfg.threads or torch.get_num_threads(),
            "after_example": after["example"], "rows": x["rows"]}

    def finish(self, ctx: RunContext, summary: dict) -> None:
        pass  # agent_summary.json and report.html (the pipeline's) are the whole record


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
