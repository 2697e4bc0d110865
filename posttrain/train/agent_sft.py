"""A short SFT warm-up on multi-turn demonstrations (rollout/agent_sft.plan_demonstrations).

    demos = await plan_demonstrations(tokenizer, tasks)
    losses = sft_on_demonstrations(model, tokenizer, demos, steps=300, optim=cfg.sft.optim, batch_size=32)

Only the assistant turns carry loss; tool observations are masked, as in the RL episodes.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from posttrain.config import OptimConfig, SFTConfig
from posttrain.rollout.agent.sft import Demo
from posttrain.train.sft import train_sequences


def sft_on_demonstrations(model: Any, tok: Any, demos: Sequence[Demo], steps: int, optim: OptimConfig | None = None,
                          batch_size: int = 32, seed: int = 0,
                          on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train in place on the assistant turns of `demos`; returns the loss per step. `optim`: the
    sft phase's defaults (lr 3e-3, 10 warm-up steps, cosine) unless given."""
    if not demos:
        raise ValueError("no demonstrations to train on (no task has an oracle plan that fits)")
    return train_sequences(model, tok.pad_token_id, demos, steps, optim or SFTConfig().optim, batch_size, seed, on_step)
