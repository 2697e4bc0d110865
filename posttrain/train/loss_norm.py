"""The token-mean loss's denominator: `rl.loss_norm`, a named choice.

Zero-variance groups (every sample of a prompt scored alike) are dropped before the update:
their advantages are 0, so they add nothing to a token-level loss's numerator. What they
change is the denominator, and with it the gradient's size: early in a run, when most
groups are dropped, dividing by the kept tokens only makes gradients several times larger
than a trainer that keeps them (issue 38: grad-norm median 0.57 against TRL's 0.25).

    counts = step_counts(all_trajs, kept_trajs)        # once per RL step
    denom = denominator("all_tokens", mask, counts, max_tokens)   # per minibatch; None: the loss's own

- `kept_tokens` (default): the minibatch's own generated tokens (mask.sum()); the loss
  divides by it itself, so `denominator` returns None and nothing changes.
- `all_tokens`: the minibatch's tokens plus its share (by rows) of the tokens of every
  scored sample that was dropped: with one minibatch, all sampled tokens of the step, as
  TRL's GRPOTrainer (`loss_type="dapo"` / `"bnpo"`), which never drops a group.
- `constant`: samples x rl.max_new_tokens, dropped samples included (Dr. GRPO; TRL
  `loss_type="dr_grpo"`): the same for every step of a fixed batch shape.

Only token-level losses take a denominator: a loss that does takes a keyword `denom` and
declares it where it registers, `@loss(name, units=..., normalisable=True)` (dapo, cispo);
config_check refuses a non-default choice for the others (grpo, gspo and dr_grpo average per
sequence or fix their own constant). Infra-error samples never count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from posttrain.types import Trajectory

CHOICES = ("kept_tokens", "all_tokens", "constant")


@dataclass(frozen=True)
class StepCounts:
    """One RL step's sample and token counts: every scored sample, and those kept for the update."""

    all_samples: int
    all_tokens: int
    kept_samples: int
    kept_tokens: int


def _tokens(t: Trajectory) -> int:
    return sum(len(x.token_ids) for x in t.turns if x.trainable)


def step_counts(sampled: Sequence[Trajectory], kept: Sequence[Trajectory]) -> StepCounts:
    """`sampled`: the step's trajectories; `kept`: those the update trains on (infra errors skipped in both)."""
    scored = [t for t in sampled if not t.infra_error]
    kept = [t for t in kept if not t.infra_error]
    return StepCounts(len(scored), sum(map(_tokens, scored)), len(kept), sum(map(_tokens, kept)))


def _all_tokens(kept_here: float, share: float, counts: StepCounts, max_tokens: int) -> float:
    return kept_here + (counts.all_tokens - counts.kept_tokens) * share  # + this minibatch's share of the dropped


def _constant(kept_here: float, share: float, counts: StepCounts, max_tokens: int) -> float:
    return counts.all_samples * share * max_tokens


_DENOMINATORS = {"all_tokens": _all_tokens, "constant": _constant}  # kept_tokens: the loss's own


def denominator(name: str, mask: torch.Tensor, counts: StepCounts | None, max_tokens: int) -> float | None:
    """The token-mean denominator of one minibatch (`mask` [b, T], its generated tokens) under
    `rl.loss_norm=name`; None: the loss's own (the minibatch's tokens)."""
    if name == "kept_tokens" or counts is None:
        return None
    if name not in _DENOMINATORS:
        raise ValueError(f"rl.loss_norm={name!r}; choices: {', '.join(CHOICES)}")
    share = mask.shape[0] / max(1, counts.kept_samples)  # this minibatch's share of the step's kept rows
    return max(1.0, _DENOMINATORS[name](float(mask.sum()), share, counts, max_tokens))
