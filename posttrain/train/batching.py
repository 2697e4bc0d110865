"""Trajectories -> padded tensors, and the policy's token logprobs over them.

Sequences are right-padded so every sequence starts at position 0, as it did in the
engine (which left-pads but derives positions from the attention mask). Targets are
shifted by one: column j of the [B, L-1] tensors scores token j+1 of the sequence.
Tool observations are in the sequence (the model reads them) but masked out of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from posttrain.types import Trajectory


@dataclass
class TokenBatch:
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    loss_mask: torch.Tensor  # [B, L-1], 1 on trainable target tokens
    old_logp: torch.Tensor  # [B, L-1], engine logprobs on trainable targets, 0 elsewhere
    model_inputs: dict = field(default_factory=dict)  # image inputs (pixel_values, ...) for a VLM


def pack_sequences(seqs: Sequence[tuple[Sequence[int], Sequence[tuple[Sequence[int], Sequence[float], bool]]]],
                   pad_id: int) -> TokenBatch:
    """seqs[i] = (prompt_ids, [(segment_ids, segment_logprobs, trainable), ...])."""
    rows, masks, olds = [], [], []
    for prompt, segments in seqs:
        ids, m, lp = list(prompt), [0.0] * len(prompt), [0.0] * len(prompt)
        for seg_ids, seg_lp, trainable in segments:
            ids += list(seg_ids)
            m += [1.0 if trainable else 0.0] * len(seg_ids)
            lp += list(seg_lp) if trainable and len(seg_lp) == len(seg_ids) else [0.0] * len(seg_ids)
        rows.append(ids), masks.append(m), olds.append(lp)
    width = max(len(r) for r in rows)
    # right-pad in Python and build each tensor in one call (a torch.tensor per row cost ~4 ms a step)
    input_ids = torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)  # [B, L]
    attn = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long)
    loss_mask = torch.tensor([m + [0.0] * (width - len(m)) for m in masks])
    old = torch.tensor([lp + [0.0] * (width - len(lp)) for lp in olds])
    return TokenBatch(input_ids, attn, loss_mask[:, 1:], old[:, 1:])


def pack_trajectories(trajs: Sequence[Trajectory], pad_id: int) -> TokenBatch:
    seqs = [(t.prompt_ids, [(turn.token_ids, turn.logprobs, turn.trainable and turn.role == "assistant")
                            for turn in t.turns]) for t in trajs]
    tb = pack_sequences(seqs, pad_id)
    from posttrain.rollout.vision import batch_model_inputs

    tb.model_inputs, image_id = batch_model_inputs(trajs)  # the pixels the engine saw, per task version
    if image_id is not None:  # image placeholder tokens are never targets of the loss
        tb.loss_mask[tb.input_ids[:, 1:] == image_id] = 0.0
    return tb


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   with_logits: bool = False, **model_inputs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(token j+1 | tokens <= j) for every j: [B, L-1] (and logits [B, L-1, V]).

    `model_inputs` (e.g. pixel_values for a VLM) are passed through to the model.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask, **model_inputs).logits[:, :-1].float()  # [B, L-1, V]
    logp = torch.log_softmax(logits, -1).gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, L-1]
    return logp, (logits if with_logits else None)


def target_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, loss_mask: torch.Tensor,
                    **model_inputs: Any) -> torch.Tensor:
    """log p(token j+1 | tokens <= j) where `loss_mask` [B, L-1] is set, 0 elsewhere: [B, L-1].

    The vocabulary projection runs only at those positions (transformers' `logits_to_keep` with a
    boolean mask: the hidden states are gathered before `lm_head`, and the model's own logit
    post-processing, such as soft-capping, still applies), so a supervised loss pays for its answer
    tokens, not for a [B, L, V] tensor over every prompt token: with Gemma 3's 262k-token vocabulary
    the full logits of a batch of 8 x 64 tokens are 0.5 GB in fp32, times three for the float copy,
    the log-softmax and its gradient. Equal to `token_logprobs` at the masked positions."""
    targets = loss_mask > 0  # [B, L-1]
    if not bool(targets.any()):  # nothing to score: the full path keeps the graph (a zero loss with a gradient)
        return token_logprobs(model, input_ids, attention_mask, **model_inputs)[0] * 0.0
    keep = torch.zeros_like(input_ids, dtype=torch.bool)  # [B, L]: position j's logits score token j+1
    keep[:, :-1] = targets
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, **model_inputs).logits
    logits = logits.reshape(-1, logits.shape[-1]).float()  # [N, V], row-major over (b, j) as targets is
    lp = torch.log_softmax(logits, -1).gather(-1, input_ids[:, 1:][targets].unsqueeze(-1)).squeeze(-1)  # [N]
    out = torch.zeros(targets.shape, dtype=lp.dtype)
    out[targets] = lp
    return out
