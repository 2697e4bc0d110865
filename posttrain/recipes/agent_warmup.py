"""The agent recipe's warm-ups: SFT on oracle action plans until a measured level, then SFT on a
base model's habits until a measured tool-call share (recipes/agent.py runs them).

    losses = await sft_until(model, tok, demos, val, cfg, log)      # copy skill: completion >= stop_at
    losses += await habits_until(model, tok, habit_demos, val, cfg, log)

Both stop on a level measured greedily on training-pool tasks (`val`), never on held-out ones,
so the choice of when to stop does not peek at the test set.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

from posttrain.config_recipe import recipe_settings

Log = Callable[[str], None]


async def validate(model: Any, tok: Any, val: Sequence[Any], cfg: Any) -> dict[str, Any]:
    """Greedy `agent_eval` of a snapshot of `model` on `val`; the model is left in train mode."""
    from posttrain.eval.agent_eval import agent_eval
    from posttrain.rollout import make_engine

    model.eval()
    res = await agent_eval(make_engine(cfg.engine.name, copy.deepcopy(model), tok), tok, val)
    model.train()
    return res


async def sft_until(model: Any, tok: Any, demos: Sequence[Any], val: Sequence[Any], cfg: Any, log: Log) -> list[float]:
    """SFT until greedy completion on `val` reaches recipe.agent.stop_at (checked every check_every steps).

    The copy skill appears abruptly (between steps 225 and 450 on seeds 0 and 1) or not at
    all: on seed 2 validation stayed at 0.000 through 1200 steps. So if no check has passed a
    single task by step restart_after, the model is re-initialised in place (tiny-model
    seed + 1000 * attempt) and SFT starts over, at most `restarts` times."""
    from posttrain.models.tiny import build_tiny
    from posttrain.train.sft import SupervisedLoop

    r, s = recipe_settings(cfg, "agent"), cfg.sft
    losses: list[float] = []
    for attempt in range(r.restarts + 1):
        if attempt:
            fresh, _ = build_tiny(cfg.model.tiny, seed=cfg.seed + 1000 * attempt)
            model.load_state_dict(fresh.state_dict())
            log(f"SFT restart {attempt}: no validation task solved by step {r.restart_after}; "
                f"new initialisation (seed {cfg.seed + 1000 * attempt})")
        model.train()
        loop = SupervisedLoop(model, tok.pad_token_id, demos, s.steps, s.optim, 32, cfg.seed + attempt)
        best = 0.0
        for step in range(s.steps):
            loop.step()
            if (step + 1) % r.check_every == 0:
                res = await validate(model, tok, val, cfg)
                best = max(best, res["rate"])
                log(f"SFT step {step + 1}: validation completion {res['rate']:.3f}, calculator called in "
                    f"{res['tool_rate']:.3f}, completion when called {res['pass_given_tool']:.3f}")
                if res["rate"] >= r.stop_at:
                    model.eval()
                    return losses + loop.losses
                if best == 0.0 and step + 1 >= r.restart_after and attempt < r.restarts:
                    break
        else:  # ran every step without reaching the stop level: keep this model
            model.eval()
            return losses + loop.losses
        losses += loop.losses
    model.eval()
    return losses


async def habits_until(model: Any, tok: Any, demos: Sequence[Any], val: Sequence[Any], cfg: Any, log: Log) -> list[float]:
    """SFT on habit demonstrations until the greedy policy calls the calculator on a share of
    `val` inside habit_stop_band, with completion when it calls at least habit_min_copy (mid-way
    through the habit SFT the copy skill can dip while the re-check habit is being learned).
    Which share the greedy policy lands on after a fixed number of steps depends on the seed
    (habits 0.8,0.1,0.3 after 300 steps: 0.565 on seed 0, 0.99 on seed 1, leaving no headroom);
    stopping on a measured level gives every seed the same kind of starting point."""
    from posttrain.train.sft import SupervisedLoop

    r = recipe_settings(cfg, "agent")
    lo, hi = r.habit_stop_band
    loop = SupervisedLoop(model, tok.pad_token_id, demos, r.habit_steps,
                          cfg.sft.optim.model_copy(update={"lr": r.habit_lr, "warmup": 5}), 32, cfg.seed + 1)
    for step in range(r.habit_steps):
        loop.step()
        if (step + 1) % r.check_every == 0:
            res = await validate(model, tok, val, cfg)
            log(f"habit step {step + 1}: validation calculator called in {res['tool_rate']:.3f}, "
                f"completion when called {res['pass_given_tool']:.3f}")
            if lo <= res["tool_rate"] <= hi and res["pass_given_tool"] >= r.habit_min_copy:
                break
    model.eval()
    return loop.losses


def habit_trend(store: Any, first: int, last: int) -> dict[str, dict[str, Any]]:
    """Sampled training episodes of RL steps [0, first) and the last `last` steps: pass rate,
    re-reads of the question (agent_tasks.REREAD first), re-checks (two or more calculator calls)
    and estimates (no calculator call), from the run's store."""
    from posttrain.rollout.agent.tasks import rereads

    steps = store.steps()
    out = {}
    for name, keep in (("early", steps[:first]), ("late", steps[-last:])):
        trajs = [t for s in keep for t in store.iter(step=s)]
        calls = [sum(x.tool_call is not None and x.tool_call.name == "calculator" for x in t.turns) for t in trajs]
        n = max(1, len(trajs))
        out[name] = {"steps": f"{keep[0]}-{keep[-1]}" if keep else "", "episodes": len(trajs),
                     "pass": sum(bool(t.verify and t.verify.passed) for t in trajs) / n,
                     "reread": sum(rereads(t) for t in trajs) / n,
                     "recheck": sum(c >= 2 for c in calls) / n, "estimate": sum(c == 0 for c in calls) / n}
    return out
