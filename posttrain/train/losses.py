"""Policy losses and KL estimators: small pure tensor functions, one per variant.

Shapes: `logp`, `old_logp`, `ref_logp`, `mask` are [B, T] over completion tokens (mask 1
on tokens the model generated, 0 on padding and tool observations); `adv` is [B], one
advantage per sequence. A loss returns `(scalar, stats)`, where stats holds detached
floats such as `clip_frac`. Selected by name with `rl.loss`; no string switches.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from posttrain.registry import Registry, kl_estimator, loss, registry


class Loss(Protocol):
    """A policy loss: (logp, old_logp [B, T], adv [B], mask [B, T], **args) -> (scalar, stats)."""

    def __call__(self, logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                 **kwargs: Any) -> tuple[torch.Tensor, dict[str, float]]: ...


LOSSES: Registry[Loss] = registry("loss")  # the typed view of the "loss" extension point


def _masked_seq_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # [B]


def _clipped_surrogate(logp, old_logp, adv, eps_low: float, eps_high: float):
    ratio = torch.exp(logp - old_logp)  # [B, T]
    a = adv.unsqueeze(-1)  # [B, 1]
    unclipped = ratio * a
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a
    per_token = -torch.minimum(unclipped, clipped)  # [B, T]
    was_clipped = (clipped < unclipped).float()  # the min picked the clipped term
    return per_token, was_clipped


def _stats(was_clipped: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    return {"clip_frac": float((was_clipped * mask).sum() / mask.sum().clamp(min=1))}


@loss("grpo", units="sequences")
def grpo_loss(logp, old_logp, adv, mask, clip_eps: float = 0.2, clip_eps_high: float | None = None, **_):
    """GRPO: clipped surrogate, mean over each sequence's tokens, then over sequences."""
    per_token, clipped = _clipped_surrogate(logp, old_logp, adv, clip_eps, clip_eps_high or clip_eps)
    return _masked_seq_mean(per_token, mask).mean(), _stats(clipped, mask)


@loss("dapo", units="tokens", normalisable=True)
def dapo_loss(logp, old_logp, adv, mask, clip_eps: float = 0.2, clip_eps_high: float | None = 0.28,
              denom: float | None = None, **_):
    """DAPO: token-level mean over the whole batch, asymmetric clip-higher. `denom` (rl.loss_norm,
    train/loss_norm.py) replaces the batch's token count as the divisor."""
    per_token, clipped = _clipped_surrogate(logp, old_logp, adv, clip_eps, clip_eps_high or clip_eps)
    return (per_token * mask).sum() / (denom or mask.sum().clamp(min=1)), _stats(clipped, mask)


@loss("dr_grpo", units="sequences")
def dr_grpo_loss(logp, old_logp, adv, mask, clip_eps: float = 0.2, clip_eps_high: float | None = None,
                 max_tokens: int | None = None, **_):
    """Dr. GRPO: sum over tokens divided by a constant (B * max_tokens), no length bias."""
    per_token, clipped = _clipped_surrogate(logp, old_logp, adv, clip_eps, clip_eps_high or clip_eps)
    denom = logp.shape[0] * (max_tokens or logp.shape[1])
    return (per_token * mask).sum() / denom, _stats(clipped, mask)


@loss("gspo", units="sequences")
def gspo_loss(logp, old_logp, adv, mask, clip_eps: float = 3e-4, clip_eps_high: float | None = 4e-4, **_):
    """GSPO: one importance ratio per sequence, exp(mean token log-ratio), clipped."""
    log_ratio = _masked_seq_mean(logp - old_logp, mask)  # [B]
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1 - clip_eps, 1 + (clip_eps_high or clip_eps))
    unclipped, clipped = ratio * adv, clipped_ratio * adv
    was = (clipped < unclipped).float()  # [B]
    return -torch.minimum(unclipped, clipped).mean(), {"clip_frac": float(was.mean())}


@loss("cispo", units="tokens", normalisable=True)
def cispo_loss(logp, old_logp, adv, mask, clip_eps_high: float | None = 0.28, denom: float | None = None, **_):
    """CISPO: REINFORCE weighted by a clipped, stop-gradient IS ratio; no token is dropped."""
    ratio = torch.exp(logp - old_logp)
    weight = torch.clamp(ratio, max=1 + (clip_eps_high or 0.28)).detach()  # [B, T]
    per_token = -weight * adv.unsqueeze(-1) * logp
    was = (ratio > 1 + (clip_eps_high or 0.28)).float()
    return (per_token * mask).sum() / (denom or mask.sum().clamp(min=1)), _stats(was, mask)


@loss("distill", units="tokens")
def distill_loss(logp, old_logp, adv, mask, clip_eps: float = 0.2, clip_eps_high: float | None = None, **_):
    """On-policy distillation (train/distill.py): `adv` is per token, [B, W] with W >= T, the reverse-KL
    advantage log p_teacher - log p_student of each sampled token (columns past T are padding of a wider
    pack: sequences are right-padded, so column j is the same token in every pack). Clipped surrogate,
    token-level mean over the batch, as dapo; stats carry the reverse KL estimate of the samples."""
    a = adv[:, : logp.shape[1]]  # [B, T]
    ratio = torch.exp(logp - old_logp)  # [B, T]
    unclipped = ratio * a
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + (clip_eps_high or clip_eps)) * a
    per_token = -torch.minimum(unclipped, clipped)
    denom = mask.sum().clamp(min=1)
    stats = _stats((clipped < unclipped).float(), mask)
    stats["reverse_kl"] = float(-(a * mask).sum() / denom)  # mean over tokens of log p_s - log p_t
    return (per_token * mask).sum() / denom, stats


class KLEstimator(Protocol):
    """A per-token KL estimate against the reference: (logp, ref_logp [B, T]) -> [B, T]."""

    def __call__(self, logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor: ...


@kl_estimator("k1")
def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return logp - ref_logp  # [B, T]


@kl_estimator("k2")
def kl_k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    return 0.5 * (logp - ref_logp) ** 2  # [B, T]


@kl_estimator("k3")
def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    d = ref_logp - logp
    return torch.exp(d) - d - 1  # [B, T], unbiased and >= 0


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy [B, T] from logits [B, T, V]."""
    logp = torch.log_softmax(logits.float(), -1)
    return -(logp.exp() * logp).sum(-1)


# ---- preference losses (DPO family), selected with `dpo.loss` ----
# Inputs are per pair [N]: summed completion logprobs under the policy (`pc`, `pr`) and the
# frozen reference (`rc`, `rr`) for the chosen and rejected completions, and their token
# counts (`nc`, `nr`). Each returns the per-pair loss [N].


class PreferenceLoss(Protocol):
    """A DPO-family loss: summed logprobs of chosen / rejected under the policy (pc, pr) and the
    reference (rc, rr), their token counts (nc, nr), all [N], and beta -> the per-pair loss [N]."""

    def __call__(self, pc: torch.Tensor, pr: torch.Tensor, rc: torch.Tensor, rr: torch.Tensor,
                 nc: torch.Tensor, nr: torch.Tensor, beta: float) -> torch.Tensor: ...


def dpo_loss(name: str):
    from posttrain.registry import registry

    return registry("dpo_loss").register(name)


@dpo_loss("sigmoid")
def dpo_sigmoid(pc, pr, rc, rr, nc, nr, beta: float) -> torch.Tensor:
    """DPO (Rafailov et al.): -log sigmoid(beta * ((pc - rc) - (pr - rr)))."""
    return -torch.nn.functional.logsigmoid(beta * ((pc - rc) - (pr - rr)))  # [N]


@dpo_loss("ipo")
def dpo_ipo(pc, pr, rc, rr, nc, nr, beta: float) -> torch.Tensor:
    """IPO (Azar et al., eq. 17) on per-token log-ratios, as in TRL: (h - 1/(2 beta))^2."""
    h = (pc - rc) / nc.clamp(min=1) - (pr - rr) / nr.clamp(min=1)  # [N]
    return (h - 1 / (2 * beta)) ** 2
