"""A short SFT warm-up on multi-turn demonstrations (rollout/agent_sft.plan_demonstrations).

    demos = await plan_demonstrations(tokenizer, tasks)
    losses = sft_on_demonstrations(model, tokenizer, demos, steps=300, lr=3e-3, batch_size=32)

Only the assistant turns carry loss; tool observations are masked, as in the RL episodes.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from posttrain.rollout.agent.sft import Demo
from posttrain.train.sft import train_sequences


def sft_on_demonstrations(model: Any, tok: Any, demos: Sequence[Demo], steps: int, lr: float = 3e-3,
                          batch_size: int = 32, warmup: int = 10, seed: int = 0,
                          on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train in place on the assistant turns of `demos`; returns the loss per step."""
    if not demos:
        raise ValueError("no demonstrations to train on (no task has an oracle plan that fits)")
    return train_sequences(model, tok.pad_token_id, demos, steps, lr, batch_size, warmup, seed, 0.0, on_step)
