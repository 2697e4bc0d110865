"""Every setting of an RL run that differs from a plain GRPO run, printed at its start.

    for line in departure_lines(cfg, has_file_tasks=True): print(line)

A "plain GRPO run" is GRPO as the paper and TRL's `loss_type="grpo"` run it: RL from the given
model (no warm-up), every training task in RL, GRPO's per-sequence loss, a constant learning
rate, truncated completions scored as they are, every sampled token in the loss's denominator,
no evaluation inside the run. (TRL 1.16's own defaults differ from it in two places: its
`loss_type` is "dapo" and its learning rate decays linearly to 0.) posttrain's defaults differ on purpose (docs/training.md says why); each line says
what the setting does and the key that turns it off, so nothing changes a run silently.
"""

from __future__ import annotations

from typing import Any

from posttrain.registry import registry


def departures(cfg: Any, has_file_tasks: bool = False) -> list[tuple[str, str, str]]:
    """(setting, what it does, how to turn it off) for each departure of `cfg` from plain GRPO."""
    rl, out = cfg.rl, []
    if cfg.sft.steps > 0:
        out.append((f"sft.steps={cfg.sft.steps}", "an SFT warm-up on oracle demonstrations runs before RL", "sft.steps=0"))
        if cfg.tasks.sft_frac > 0:
            out.append((f"tasks.sft_frac={cfg.tasks.sft_frac}", "that share of the tasks with an oracle answer is SFT's, "
                        "not RL's", "tasks.sft_frac=0"))
    if rl.optim.warmup > 0:  # was rl.warmup_steps (still read: config_optim.LEGACY_OPTIM_KEYS)
        out.append((f"rl.optim.warmup={rl.optim.warmup}", "the learning rate ramps up linearly over these steps",
                    "rl.optim.warmup=0"))
    if rl.optim.schedule != "constant":
        out.append((f"rl.optim.schedule={rl.optim.schedule}", "the learning rate decays after the warm-up",
                    "rl.optim.schedule=constant"))
    if rl.overlong.name != "score":
        what = {"gate": "a completion that hits rl.max_new_tokens scores 0 without running the verifier",
                "soft_penalty": f"long completions get DAPO's soft overlong penalty {dict(rl.overlong.args)}"}
        out.append((f"rl.overlong.name={rl.overlong.name}", what.get(rl.overlong.name, "a plugin's overlong policy"),
                    "rl.overlong.name=score"))
    if rl.loss_norm != "all_tokens" and registry("loss").props(rl.loss.name)["normalisable"]:  # a token-mean loss
        out.append((f"rl.loss_norm={rl.loss_norm}", "zero-variance groups are dropped and the token mean divides by "
                    + ("the kept groups' tokens only" if rl.loss_norm == "kept_tokens" else "a constant"),
                    "rl.loss_norm=all_tokens"))
    if rl.loss.name != "grpo":
        out.append((f"rl.loss.name={rl.loss.name}", "not GRPO's per-sequence mean with a symmetric clip", "rl.loss.name=grpo"))
    if rl.rollout_correction:
        out.append(("rl.rollout_correction=true", f"each token is weighted by rl.offpolicy's {rl.offpolicy.name} "
                    "correction of the trainer's recomputed logprobs against the engine's", "rl.rollout_correction=false"))
    if rl.format_weight > 0:
        out.append((f"rl.format_weight={rl.format_weight}", "a well-formed answer earns this much extra reward",
                    "rl.format_weight=0"))
    if cfg.schedule.name != "uniform":
        out.append((f"schedule.name={cfg.schedule.name}", "prompts are not drawn uniformly", "schedule.name=uniform"))
    if cfg.schedule.domain_shares != "mixture":
        out.append((f"schedule.domain_shares={cfg.schedule.domain_shares}", "each domain's share of a step follows the "
                    "rate at which its groups carried reward variance, not its mixture weight", "schedule.domain_shares=mixture"))
    if cfg.schedule.curriculum is not None and cfg.schedule.curriculum.steer:
        out.append(("schedule.curriculum", "each domain is drawn at one difficulty level that follows its pass rate",
                    "schedule.curriculum=null"))
    if has_file_tasks and cfg.tasks.answer_format is None:
        out.append(("tasks.answer_format=None", "a one-step file task with a plain verifier must answer on one line "
                    "(task metadata.answer_format wins)", "tasks.answer_format=text"))
    for when, on in (("before", cfg.eval.before), ("after", cfg.eval.after)):
        if on:
            out.append((f"eval.{when}=true", f"held-out pass@1 is measured {when} RL", f"eval.{when}=false"))
    return out


def departure_lines(cfg: Any, has_file_tasks: bool = False) -> list[str]:
    """The printed block: a header, then one line per departure (none: one line saying so)."""
    rows = departures(cfg, has_file_tasks)
    if not rows:
        return ["settings: a plain GRPO run (no departures)"]
    width = max(len(k) for k, _, _ in rows)
    return ["settings that differ from a plain GRPO run (docs/training.md):",
            *(f"  {k:<{width}}  {what}; off: {off}" for k, what, off in rows)]
